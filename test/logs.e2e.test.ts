import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logRefs, readLogs } from '../cli/client-logs.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

const exec = promisify(execFile);
const NODE = 'logs-node';

/** Shipped logs end to end: real agent, API and control worker; the log read back through the API and gpuctl. */
describe('shipped logs', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('logs', { agents: [{ nodeId: NODE, gpus: 2 }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  const gpuctl = async (...args: string[]) => {
    try {
      const r = await exec(process.execPath, [gpuctlPath, ...args], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl }, maxBuffer: 64 << 20 });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const logDir = () => path.join(c.home, 'agent', NODE, 'logs');
  const runOf = async (jobId: string) => {
    const db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
    try {
      return (await db.query<{ id: string }>('select id from runs where job_id = $1 and attempt = 1', [jobId])).rows[0]?.id;
    } finally {
      await db.end();
    }
  };
  /** A job that writes to stdout and stderr and fails, once it has ended. */
  const outAndErr = async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'echo out 1; sleep 0.8; echo err 1 >&2; sleep 0.8; echo out 2; exit 2' });
    return c.client.waitFor(job.id, undefined, 30_000);
  };

  it('a job writing to stdout and stderr: gpuctl logs shows both, complete and in order; a CUSTOM job keeps them with its exit code and no Run', async () => {
    const j = await outAndErr();
    expect([j.state, j.exit_code]).toEqual(['FAILED', 2]);
    // The exit was reported after the log was flushed: both streams are complete already.
    const refs = await logRefs(c.client, j.id);
    expect(refs.map((r) => [r.attempt, r.stream, r.size_bytes, r.complete, r.node_id, r.run_id])).toEqual([
      [1, 'stderr', 6, true, NODE, null],
      [1, 'stdout', 12, true, NODE, null],
    ]);
    expect(refs.find((r) => r.stream === 'stderr')!.location).toMatch(/attempt-1\.stderr\.log$/);
    const all = await gpuctl('logs', j.id);
    expect(all).toMatchObject({ code: 0, stdout: 'out 1\nerr 1\nout 2\n' });
    expect((await gpuctl('logs', '--stream', 'stderr', j.id)).stdout).toBe('err 1\n');
    expect(await readLogs(c.client, j.id, { stream: 'stdout', attempt: 1 })).toBe('out 1\nout 2\n');
    const bad = await gpuctl('logs', 'job-nope');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/^gpuctl: job job-nope not found/);
  });

  it("a TRAIN job's Run reads its attempt's log (gpuctl logs RUN_ID)", async () => {
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: 'echo "run $GPUPLANE_RUN_ID"' });
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('SUCCEEDED');
    const runId = await runOf(job.id);
    expect(runId).toBeTruthy();
    expect((await logRefs(c.client, job.id)).every((r) => r.run_id === runId)).toBe(true);
    expect(await readLogs(c.client, runId!)).toBe(`run ${runId}\n`);
  });

  it('an agent SIGKILLed and restarted while its job prints: every line shipped exactly once, no gap', async () => {
    const n = 250;
    const job = await c.client.submit({
      type: 'CUSTOM',
      gpus: 1,
      // Numbered lines through the restart, then a burst of several chunks.
      command: `i=1; while [ $i -le ${n} ]; do echo "line $i"; echo "warn $i" >&2; i=$((i+1)); sleep 0.03; done; seq 1 60000`,
    });
    await until('some lines shipped', async () => ((await logRefs(c.client, job.id)).find((r) => r.stream === 'stdout')?.size_bytes ?? 0) > 200, 30_000);
    const logPath = (await c.client.job(job.id)).attempts[0].log_path!;
    await c.agents.get(NODE)!.kill('SIGKILL');
    // Lines written while no agent runs: the next one ships them from where the API's copy ends.
    const atKill = fs.statSync(logPath).size;
    await until('lines written while the agent is down', () => fs.statSync(logPath).size > atKill, 10_000);
    const agent = await c.addAgent({ nodeId: NODE, gpus: 2 });
    expect(agent.output).toContain('re-attached to 1 running attempt');
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.attempts.map((a) => [a.attempt, a.state])).toEqual([[1, 'SUCCEEDED']]);
    const numbered = (word: string, count: number) => Array.from({ length: count }, (_, i) => `${word} ${i + 1}\n`).join('');
    const seq = Array.from({ length: 60000 }, (_, i) => `${i + 1}\n`).join('');
    expect(await readLogs(c.client, job.id, { stream: 'stdout' })).toBe(numbered('line', n) + seq);
    expect(await readLogs(c.client, job.id, { stream: 'stderr' })).toBe(numbered('warn', n));
    expect((await logRefs(c.client, job.id)).every((r) => r.complete)).toBe(true);
  });

  it('gpuctl logs -f streams lines as they are written and ends when the job ends', async () => {
    // The job ends only once the test has seen a tick while it runs (go exists): on a loaded machine gpuctl may take longer to start than the ticks.
    const go = path.join(c.work, `logs-follow-go-${Date.now()}`);
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 0.5; done; while [ ! -e ${go} ]; do sleep 0.1; done` });
    await c.client.waitFor(job.id, ['RUNNING', 'SUCCEEDED'], 30_000);
    const f = spawn(process.execPath, [gpuctlPath, 'logs', '-f', job.id], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl }, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    const seenWhile: string[] = [];
    f.stdout.on('data', (d: Buffer) => (text += d.toString()));
    const exited = new Promise<number | null>((r) => f.once('exit', (code) => r(code)));
    // A tick arrives while the job still runs: it is streamed, not read at the end.
    await until('tick 2 streamed', () => text.includes('tick 2'), 20_000);
    seenWhile.push((await c.client.job(job.id)).state);
    fs.writeFileSync(go, '');
    expect(await exited).toBe(0);
    expect(seenWhile).toEqual(['RUNNING']);
    expect(text).toBe('tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\n');
    expect((await c.client.job(job.id)).state).toBe('SUCCEEDED');
  });

  it("a failure hint is read from the shipped log, even with the node's file gone", async () => {
    // The job deletes its own log files before it exits: only the shipped copy has the OOM line.
    const dir = path.join(logDir(), '$GPUPLANE_JOB_ID');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `echo "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2; sleep 1.5; rm -f ${dir}/attempt-1.*; exit 1` });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('FAILED');
    expect(fs.existsSync(path.join(logDir(), job.id, 'attempt-1.stderr.log'))).toBe(false);
    expect(j.reason).toMatch(/^out of memory \(exit code 1\) — hint/);
  });

  it("logs outlive the node: with its agent gone and its log dir deleted, gpuctl logs still shows them", async () => {
    const jobId = (await outAndErr()).id;
    await c.agents.get(NODE)!.kill('SIGKILL');
    fs.rmSync(logDir(), { recursive: true, force: true });
    const r = await gpuctl('logs', jobId);
    expect(r).toMatchObject({ code: 0, stdout: 'out 1\nerr 1\nout 2\n' });
    const refs = await gpuctl('logs', '--refs', jobId);
    expect(refs.stdout).toMatch(/^ATTEMPT +STREAM +BYTES +COMPLETE +NODE +LOCATION\n/);
    expect(refs.stdout).toMatch(new RegExp(`^1 +stdout +12 +yes +${NODE} +/\\S+attempt-1\\.log`, 'm'));
  });
});
