/** bench/dispatch's measures: the flood of one-card jobs, what a job costs Temporal, and `gpuctl up` as a shape. */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { GpuplaneClient } from '../cli/client.ts';
import { cliToken } from '../runtime/credentials.ts';
import { connectClient } from '../temporal/setup.ts';
import { jobWorkflowId } from '../workflows/names.ts';
import { gpuctlPath } from '../test/support/cluster.ts';
import { freePort } from '../test/support/ports.ts';

export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

export async function pool<T>(items: T[], width: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (i < items.length) await fn(items[i++]);
    }),
  );
}

export interface Throughput {
  rate: number;
  seconds: number;
  ok: number;
  post: { p50: number; p99: number };
}

/** `jobs` one-card `true` jobs, one POST at a time; jobs/s from the first submit to the last job ended. */
export async function sequentialTrue(client: GpuplaneClient, jobs: number): Promise<Throughput & { ids: string[] }> {
  const ids: string[] = [];
  const post: number[] = [];
  const t0 = Date.now();
  for (let i = 0; i < jobs; i++) {
    const a = performance.now();
    ids.push((await client.submit({ type: 'CUSTOM', gpus: 1, command: ['true'], working_dir: '/tmp' })).id);
    post.push(performance.now() - a);
  }
  const mine = new Set(ids);
  // Waits on the counts (one cheap query a poll), so that waiting does not load the API under test.
  const open = ['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'LOST'];
  for (;;) {
    const c = await client.request<{ states: Record<string, number> }>('GET', '/jobs/counts');
    if (open.every((s) => (c.states[s] ?? 0) === 0)) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const done = (await client.request<{ jobs: { id: string; state: string; ended_at: string | null }[] }>('GET', `/jobs?limit=1000`)).jobs.filter((j) => j.ended_at && mine.has(j.id));
  const ended = { ok: done.filter((j) => j.state === 'SUCCEEDED').length, last: Math.max(...done.map((j) => new Date(j.ended_at!).getTime())) };
  const seconds = (ended.last - t0) / 1000;
  return { rate: jobs / seconds, seconds, ok: ended.ok, post: { p50: pct(post, 50), p99: pct(post, 99) }, ids };
}

/** What one job costs Temporal: history events, workflow tasks, activities, signals and markers, from real histories. */
export async function actionsPerJob(address: string, namespace: string, ids: string[]) {
  const t = await connectClient(address, namespace);
  const totals = { events: 0, workflowTasks: 0, activities: 0, signals: 0, markers: 0, upserts: 0 };
  const sample = ids.slice(-20);
  for (const id of sample) {
    const h = await t.client.workflow.getHandle(jobWorkflowId(id)).fetchHistory();
    for (const e of h.events ?? []) {
      totals.events++;
      if (e.workflowTaskCompletedEventAttributes) totals.workflowTasks++;
      if (e.activityTaskScheduledEventAttributes) totals.activities++;
      if (e.workflowExecutionSignaledEventAttributes) totals.signals++;
      // Local activities record a marker each; a patch records one too, which is no database write.
      if (e.markerRecordedEventAttributes?.markerName === 'core_local_activity') totals.markers++;
      if (e.upsertWorkflowSearchAttributesEventAttributes) totals.upserts++;
    }
  }
  await t.close();
  const per = (n: number) => +(n / sample.length).toFixed(1);
  return { events: per(totals.events), workflowTasks: per(totals.workflowTasks), activities: per(totals.activities), signals: per(totals.signals), localActivities: per(totals.markers), searchAttributeUpserts: per(totals.upserts) };
}

/** `gpuctl up` on its embedded defaults (PGlite, its own dev server), as the README's first command starts it. */
export async function startEmbedded(scratch: string): Promise<{ client: GpuplaneClient; stop(): Promise<void> }> {
  const apiPort = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, GPUPLANE_HOME: path.join(scratch, 'embedded'), GPUPLANE_API_PORT: String(apiPort), GPUPLANE_API_URL: `http://127.0.0.1:${apiPort}`, GPUPLANE_LOG_LEVEL: 'warn' };
  delete env.TEMPORAL_ADDRESS;
  delete env.DATABASE_URL;
  const up = spawn(process.execPath, [gpuctlPath, 'up', '--fake-gpus', '8', '--temporal-port', String(await freePort()), '--temporal-ui-port', String(await freePort())], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  up.stdout.on('data', (d: Buffer) => (out += d));
  up.stderr.on('data', (d: Buffer) => (out += d));
  const deadline = Date.now() + 120_000;
  while (!out.includes('GPUPlane is up')) {
    if (up.exitCode !== null || Date.now() > deadline) throw new Error(`gpuctl up did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    // The client a user of that machine has: the admin token gpuctl up keeps in its home.
    client: new GpuplaneClient(`http://127.0.0.1:${apiPort}`, { token: cliToken(env.GPUPLANE_HOME!) }),
    async stop() {
      const gone = new Promise((r) => up.once('exit', r));
      up.kill('SIGINT');
      await gone;
    },
  };
}
