import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, gpuctlPath, type Cluster } from './support/cluster.ts';

const exec = promisify(execFile);

describe('gpuctl', () => {
  let c: Cluster;
  const gpuctl = async (...args: string[]) => {
    try {
      const r = await exec(process.execPath, [gpuctlPath, ...args], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl }, cwd: c.work });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  beforeAll(async () => {
    c = await startCluster('cli', { agents: [{ nodeId: 'c1', gpus: 2, labels: { kind: 'test' } }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('submits, waits and reports through exit statuses', async () => {
    const ok = await gpuctl('submit', '--type', 'CUSTOM', '--gpus', '1', '--selector', 'kind=test', '--env', 'X=42', '--', 'sh', '-c', 'test "$X" = 42 && test "$PWD" = "' + c.work + '"');
    expect(ok.code).toBe(0);
    const id = ok.stdout.trim().split('\n').at(-1)!;
    expect(id).toMatch(/^job-/);
    expect((await gpuctl('wait', id)).code).toBe(0);

    const bad = (await gpuctl('submit', '--type', 'CUSTOM', '--gpus', '0', '--', 'sh', '-c', 'exit 3')).stdout.trim();
    const waited = await gpuctl('wait', bad, '--json');
    expect(waited.code).toBe(3);
    expect(JSON.parse(waited.stdout)).toMatchObject({ state: 'FAILED', exit_code: 3 });

    const long = (await gpuctl('submit', '--gpus', '0', '--', 'sleep', '60')).stdout.trim();
    expect((await gpuctl('cancel', long)).code).toBe(0);
    expect((await gpuctl('wait', long)).code).toBe(4);
  });

  it('prints JSON on every read command', async () => {
    const sub = await gpuctl('submit', '--json', '--gpus', '0', '--', 'true');
    const job = JSON.parse(sub.stdout);
    expect(job.state).toBe('CREATED');
    const jobs = JSON.parse((await gpuctl('jobs', '--json', '--limit', '5')).stdout);
    expect(jobs.map((j: { id: string }) => j.id)).toContain(job.id);
    const detail = JSON.parse((await gpuctl('job', job.id, '--json')).stdout);
    expect(detail.history[0].to).toBe('CREATED');
    const nodes = JSON.parse((await gpuctl('nodes', '--json')).stdout);
    expect(nodes[0]).toMatchObject({ id: 'c1', status: 'ONLINE', labels: { kind: 'test' } });
    expect(nodes[0].gpus).toHaveLength(2);
    expect((await gpuctl('nodes')).stdout).toContain('c1');
  });

  it('fails with one line and a non-zero status on bad input', async () => {
    for (const args of [
      ['submit', '--gpus', '-1', '--', 'true'],
      ['submit', '--gpus', 'two', '--', 'true'],
      ['submit', '--bogus', '--', 'true'],
      ['submit', '--type', 'BATCH', '--', 'true'],
      ['job', 'job-nope'],
      ['cancel', 'job-nope'],
      ['nodes', 'extra'],
    ]) {
      const r = await gpuctl(...args);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
    const unreachable = await exec(process.execPath, [gpuctlPath, '--api', 'http://127.0.0.1:9', 'jobs']).catch((e: { code: number; stderr: string }) => e);
    expect((unreachable as { code: number }).code).toBe(1);
    expect((unreachable as { stderr: string }).stderr).toContain('cannot reach');
  });
});
