/**
 * Issue 39's per-tenant limits end to end, on real processes (agent, API, control worker, the
 * job workflow): a job's log past GPUPLANE_LOG_CAP_MIB is shipped up to the cap and a line that
 * says so, its file on the node whole; a job that keeps stalling with `--on-stall requeue` is
 * re-queued GPUPLANE_MAX_STALL_REQUEUES times, then ends FAILED "stalled N times".
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logRefs } from '../cli/client-logs.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';

const exec = promisify(execFile);
const NODE = 'limits-node';
const MIB = 1024 * 1024;

describe('per-tenant limits: the log cap and the stall re-queue cap', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('tenant-limits', {
      agents: [{ nodeId: NODE, gpus: 2, env: { GPUPLANE_TELEMETRY_S: '1' } }],
      env: { GPUPLANE_LOG_CAP_MIB: '1', GPUPLANE_MAX_STALL_REQUEUES: '1' },
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('a job that writes 5 MiB: its shipped log is the first 1 MiB and the truncation line, gpuctl logs shows it, and the file on the node is whole', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: `yes 'a line of a chatty job, 0123456789' | head -c ${5 * MIB}` });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    const refs = await logRefs(c.client, job.id, 1);
    const out = refs.find((r) => r.stream === 'stdout')!;
    expect(out.complete).toBe(true);
    const line = `gpuplane: log truncated at 1 MiB; the whole file is kept on node ${NODE} at ${out.location}\n`;
    expect(out.size_bytes).toBeLessThanOrEqual(MIB + 1 + line.length);
    const r = await exec(process.execPath, [gpuctlPath, 'logs', job.id], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl }, maxBuffer: 64 << 20 });
    expect(r.stdout.length).toBeLessThan(MIB + 200);
    expect(r.stdout.startsWith('a line of a chatty job, 0123456789\n')).toBe(true);
    expect(r.stdout.endsWith(`\n${line}`)).toBe(true);
    // The node keeps the whole file, as the line says.
    expect(fs.statSync(out.location!).size).toBe(5 * MIB);
  });

  it('with --on-stall requeue and a cap of 1 re-queue: attempt 1 is re-queued, attempt 2 ends FAILED "stalled 2 times"', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, stall_after_s: 3, on_stall: 'requeue', preempt_grace_s: 1, command: 'sleep 120' });
    const done = await c.client.waitFor(job.id, ['FAILED', 'CANCELLED', 'SUCCEEDED'], 90_000);
    expect(done.state).toBe('FAILED');
    expect(done.attempt).toBe(2);
    expect(done.attempts[0].state).toBe('PREEMPTED');
    expect(done.attempts[0].reason).toContain('re-queued (--on-stall requeue)');
    expect(done.reason).toMatch(/^stalled 2 times: .*--on-stall requeue re-queues at most 1 time\)$/);
  });
});
