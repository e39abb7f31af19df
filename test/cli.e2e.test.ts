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
    c = await startCluster('cli', { agents: [{ nodeId: 'c1', gpus: 2, labels: { kind: 'test' }, env: { GPUPLANE_ADVERTISE_ADDR: 'gpu-c1.lab.example' } }] });
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

  it("names a Python job's exception in its reason", async () => {
    const id = (await gpuctl('submit', '--gpus', '0', '--', 'python3', '-c', 'import torch_not_here')).stdout.trim();
    expect((await gpuctl('wait', id)).code).toBe(3);
    const job = JSON.parse((await gpuctl('job', id, '--json')).stdout);
    expect(job.reason).toBe(`ModuleNotFoundError: No module named 'torch_not_here' (exit code 1) — hint: see the attempt's log (gpuctl logs ${id})`);
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
    expect(nodes[0]).toMatchObject({ id: 'c1', status: 'ONLINE', labels: { kind: 'test' }, address: 'gpu-c1.lab.example' });
    expect(nodes[0].gpus).toHaveLength(2);
    expect((await gpuctl('nodes')).stdout).toMatch(/^c1 +ONLINE +gpu-c1\.lab\.example +kind=test node=c1 +2 /m);
  });

  it("shows each attempt's run, as gpuctl runs --job does", async () => {
    const id = (await gpuctl('submit', '--gpus', '0', '--', 'true')).stdout.trim();
    expect((await gpuctl('wait', id)).code).toBe(0);
    const detail = JSON.parse((await gpuctl('job', id, '--json')).stdout);
    const runs = JSON.parse((await gpuctl('runs', '--job', id, '--json')).stdout);
    expect(detail.attempts[0].run_id).toMatch(/^run-/);
    expect(detail.attempts[0].run_id).toBe(runs[0].id);
    expect((await gpuctl('job', id)).stdout).toMatch(new RegExp(`^1 {2,}${runs[0].id} {2,}SUCCEEDED`, 'm'));
  });

  it('prints borderless, uncoloured tables when piped', async () => {
    const id = (await gpuctl('submit', '--type', 'CUSTOM', '--gpus', '1', '--', 'sh', '-c', 'echo oops; exit 3')).stdout.trim();
    expect((await gpuctl('wait', id)).code).toBe(3);
    const jobs = await gpuctl('jobs');
    const job = await gpuctl('job', id);
    const nodes = await gpuctl('nodes');
    // NO_COLOR wins even where a library would be told to force colour.
    const forced = await exec(process.execPath, [gpuctlPath, 'job', id], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl, NO_COLOR: '1', FORCE_COLOR: '3' } });
    for (const out of [jobs.stdout, job.stdout, nodes.stdout, forced.stdout]) {
      expect(out).not.toContain('\x1b');
      expect(out).not.toMatch(/[\u2500-\u257f]/); // box drawing: ─ │ ┌ ┼ …
    }
    expect(jobs.stdout.split('\n')[0]).toMatch(/^ID {2,}TYPE {2,}STATE {2,}PROJECT {2,}ATT {2,}GPUS {2,}PRIO {2,}NODE {2,}CARDS {2,}AGE {2,}COMMAND {2,}REASON$/);
    expect(jobs.stdout).toMatch(new RegExp(`^${id} +CUSTOM +FAILED +1 +1 +0 +c1 .*\\d+s +sh -c 'echo oops; exit 3' +exit code 3`, 'm'));
    const [block, attempts, history] = job.stdout.trimEnd().split('\n\n');
    expect(block).toMatch(new RegExp(`^id: +${id}$`, 'm'));
    expect(block).toMatch(/^command: +sh -c 'echo oops; exit 3'$/m);
    expect(block).toMatch(new RegExp(`^reason: +exit code 3 — hint: see the attempt's log \\(gpuctl logs ${id}\\)$`, 'm'));
    expect(block).toMatch(new RegExp(`^log: +gpuctl logs ${id}$`, 'm'));
    expect(attempts).toMatch(/^ATTEMPT {2,}RUN {2,}STATE {2,}NODE {2,}CARDS {2,}PID {2,}EXIT {2,}REASON {2,}CHANGED\n1 {2,}FAILED {2,}c1 /);
    expect(history.split('\n')[0]).toMatch(/^AT {2,}ATTEMPT {2,}FROM {2,}TO {2,}DETAIL$/);
    expect(history).toMatch(/ RUNNING {2,}FAILED/);
    // Long reasons are cut in tables: no line of `gpuctl jobs` is wider than its capped columns allow.
    expect(Math.max(...jobs.stdout.split('\n').map((l) => l.length))).toBeLessThan(200);
    expect(nodes.stdout).toMatch(/^c1 {2,}ONLINE {2,}gpu-c1\.lab\.example {2,}kind=test node=c1 {2,}2 {2,}/m);
  });

  it('logs JSON lines on stderr from the API and the workers', async () => {
    // stdout and stderr share one buffer: take the lines that are whole JSON objects.
    const json = (out: string) =>
      out.split('\n').flatMap((l) => {
        try {
          const v: unknown = JSON.parse(l);
          return v && typeof v === 'object' ? [v as Record<string, unknown>] : [];
        } catch {
          return [];
        }
      });
    expect(json(c.api.output)).toContainEqual(expect.objectContaining({ level: 'info', msg: expect.stringMatching(/^Server listening at /) }));
    expect(json(c.control.output)).toContainEqual(expect.objectContaining({ level: 'info', component: 'temporal', msg: 'Worker state changed' }));
    expect(json(c.agents.get('c1')!.output)).toContainEqual(expect.objectContaining({ level: 'info', component: 'temporal', msg: 'Worker state changed' }));
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
