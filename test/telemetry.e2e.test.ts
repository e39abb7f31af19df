import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobDetailJson } from '../cli/client.ts';
import { getRun, runMetrics } from '../cli/client-runs.ts';
import { renderJobs } from '../cli/render.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';
import { promtoolCheck } from './support/promtool.ts';

/** A job process that keeps one core busy for `s` seconds (its fake card then reads busy). */
const busyFor = (s: number) => `node -e "const t = Date.now(); while (Date.now() - t < ${s * 1000}) {}"`;

describe('GPU telemetry and stalled-job detection (fake cards, reports every second)', () => {
  let c: Cluster;
  let workerMetrics: string;
  beforeAll(async () => {
    workerMetrics = `127.0.0.1:${await freePort()}`;
    c = await startCluster('telemetry', { agents: [{ nodeId: 'tel-a', gpus: 2, env: { GPUPLANE_TELEMETRY_S: '1' } }], controlEnv: { GPUPLANE_WORKER_METRICS_ADDR: workerMetrics } });
  });
  afterAll(async () => {
    await c?.stop();
  });

  const jobEvents = async (id: string) => (await c.client.request<{ events: { kind: string; message: string; attempt: number | null }[] }>('GET', `/jobs/${id}/events?limit=1000`)).events;
  /** The telemetry reports the API has answered (its request histogram's count for the route): tel-a's, the one agent. */
  const telemetryReports = async (): Promise<number> => {
    const text = await (await fetch(`${c.apiUrl}/metrics`, { headers: c.auth })).text();
    const m = /^gpuplane_http_request_duration_seconds_count\{[^}]*route="[^"]*\/nodes\/:id\/telemetry"[^}]*status="200"[^}]*\} (\d+)$/m.exec(text);
    return m ? Number(m[1]) : 0;
  };
  const utilization = async (card: number): Promise<number | null> => {
    const text = await (await fetch(`${c.apiUrl}/metrics`, { headers: c.auth })).text();
    const m = new RegExp(`^gpuplane_gpu_utilization_ratio\\{node="tel-a",card="${card}"\\} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };

  it("writes system/gpu.* points into a running job's run at the interval, stops when it ends, and shows its busy card in /metrics", async () => {
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: busyFor(7) });
    await c.client.waitFor(job.id, ['RUNNING'], 60_000);
    const running = await c.client.job(job.id);
    const card = running.gpu_indices![0];
    // The card's gauge rises while its job computes. A fake card reads its job's CPU share, and a
    // job weighs 25 to a busy plane process's 100 (GPUPLANE_JOB_CPU_WEIGHT): on a machine busy
    // with other test files' planes the loop may get a tenth of a core, so any clear rise counts.
    let peak = 0;
    await until('the card reads busy', async () => {
      peak = Math.max(peak, (await utilization(card)) ?? 0);
      return peak >= 0.05;
    }, 20_000);
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    const runId = done.attempts[0].run_id!;
    const key = `system/gpu.${card}.utilization`;
    const read = async () => (await runMetrics(c.client, runId, { keys: [key, 'system/cpu.utilization', `system/gpu.${card}.memory_used_mb`] })).series;
    const series = await read();
    const util = series.find((s) => s.key === key)!.points!;
    expect(series.map((s) => s.key).sort()).toEqual(['system/cpu.utilization', `system/gpu.${card}.memory_used_mb`, key].sort());
    expect(util.length).toBeGreaterThanOrEqual(4);
    expect(Math.max(...util.map((p) => Number(p.value)))).toBeGreaterThanOrEqual(5);
    // One point a second: the median gap between reports.
    const gaps = util.slice(1).map((p, i) => p.ts - util[i].ts).sort((a, b) => a - b);
    const median = gaps[Math.floor(gaps.length / 2)];
    expect(median).toBeGreaterThan(600);
    expect(median).toBeLessThan(1800);
    // The other card was never the job's: none of its series.
    const run = await getRun(c.client, runId);
    expect(Object.keys(run.metrics).filter((k) => k.startsWith(`system/gpu.${1 - card}.`))).toEqual([]);
    // Ended: no more points. Two of the node's reports answered after the read (its agent sends
    // them one after another, a second apart): the second began after the read, and would have
    // carried the attempt, and its points, were it still reported.
    const from = await telemetryReports();
    await until('two telemetry reports after the read', async () => (await telemetryReports()) >= from + 2, 20_000);
    expect((await read()).find((s) => s.key === key)!.points!.length).toBe(util.length);
    // Idle again: the card's gauge falls back.
    await until('the card reads idle', async () => (await utilization(card)) === 0, 20_000);
  });

  it('flags a job that sleeps silently, with an event and a badge; one that logs metrics is never flagged', async () => {
    const silent = await c.client.submit({ type: 'CUSTOM', gpus: 1, stall_after_s: 3, command: 'sleep 120' });
    // Logs a metric every second while it sleeps, and prints nothing.
    const script = path.join(c.work, 'logs-metrics.mjs');
    fs.writeFileSync(
      script,
      `const url = process.env.GPUPLANE_API_URL + '/api/v1/runs/' + process.env.GPUPLANE_RUN_ID + '/metrics';
for (let step = 0; step < 9; step++) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.GPUPLANE_TOKEN }, body: JSON.stringify({ points: [{ key: 'loss', step, value: 1 / (step + 1) }] }) });
  if (!r.ok) process.exit(3);
  await new Promise((ok) => setTimeout(ok, 1000));
}
`,
    );
    const logging = await c.client.submit({ type: 'TRAIN', gpus: 1, stall_after_s: 3, command: `node ${script}` });
    // A TRAIN job without its own stall-after takes its project's.
    await c.client.request('PUT', '/projects/quiet/stall-after', { stall_after_s: 3 });
    const quiet = await c.client.submit({ type: 'TRAIN', gpus: 0, project: 'quiet', command: 'sleep 120' });
    let j: JobDetailJson | null = null;
    await until('the silent job is stalled', async () => (j = await c.client.job(silent.id)).stalled_at !== null, 30_000);
    expect(j!.state).toBe('RUNNING');
    expect(renderJobs([j!])).toContain('RUNNING (stalled)');
    const ev = (await jobEvents(silent.id)).filter((e) => e.kind === 'job.stalled');
    expect(ev).toHaveLength(1);
    expect(ev[0].message).toContain('stalled: no metric logged, no log output');
    const listed = (await c.client.jobs({ state: 'RUNNING' })).find((x) => x.id === silent.id)!;
    expect(listed.stalled_at).not.toBeNull();
    await c.client.cancel(silent.id);
    await until('the quiet project\'s job is stalled', async () => (await c.client.job(quiet.id)).stalled_at !== null, 30_000);
    await c.client.cancel(quiet.id);

    const done = await c.client.waitFor(logging.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    expect((await jobEvents(logging.id)).filter((e) => e.kind === 'job.stalled')).toEqual([]);
    expect(done.attempts[0].stalled_at).toBeNull();
  });

  it("serves the control worker's Temporal SDK metrics and the scheduling pass's time at GPUPLANE_WORKER_METRICS_ADDR, as promtool wants them", async () => {
    const text = await until('the worker metrics show a pass', async () => {
      const t = await (await fetch(`http://${workerMetrics}/metrics`)).text();
      return /^gpuplane_scheduling_pass_seconds_count [1-9]/m.test(t) ? t : null;
    }, 30_000);
    expect(text).toMatch(/^gpuplane_scheduling_pass_seconds_bucket\{le="0\.15"\} \d+/m);
    expect(text).toMatch(/^temporal_workflow_task_execution_latency_seconds_bucket/m);
    expect(text).toMatch(/^temporal_request_total\{/m);
    expect(await promtoolCheck(text)).toBe('');
  });

  it('with --on-stall requeue a stalled job becomes attempt 2; with --on-stall kill it ends FAILED "stalled"', async () => {
    const requeued = await c.client.submit({ type: 'CUSTOM', gpus: 1, stall_after_s: 3, on_stall: 'requeue', preempt_grace_s: 1, command: 'sleep 120' });
    const killed = await c.client.submit({ type: 'CUSTOM', gpus: 1, stall_after_s: 3, on_stall: 'kill', preempt_grace_s: 1, command: 'sleep 120' });
    await until('the stalled job is re-queued', async () => (await c.client.job(requeued.id)).attempt >= 2, 45_000);
    const r = await c.client.job(requeued.id);
    expect(r.attempts[0].state).toBe('PREEMPTED');
    expect(r.attempts[0].reason).toContain('stalled');
    expect(r.attempts[0].reason).toContain('--on-stall requeue');
    const k = await c.client.waitFor(killed.id, undefined, 45_000);
    expect(k.state).toBe('FAILED');
    expect(k.attempt).toBe(1);
    expect(k.reason).toMatch(/^stalled: .*--on-stall kill/);
    await c.client.cancel(requeued.id);
    expect((await c.client.waitFor(requeued.id, undefined, 45_000)).state).toBe('CANCELLED');
  });
});
