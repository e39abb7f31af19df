/**
 * bench/dispatch: how fast jobs go from submit to RUNNING and through the system.
 *
 *   npm run bench:dispatch [-- --jobs 1000 --latency-samples 50 --queue 10000]
 *
 * Real parts: a throwaway PostgreSQL cluster, the Temporal dev server, the HTTP API, the
 * control worker and the agents (in this one process, each agent its own Temporal worker on
 * its own task queue). The peer, run in the same process against the same servers, is bare
 * Temporal: one workflow with one no-op activity per job, which bounds what any design on
 * this Temporal server can reach.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from '@temporalio/worker';
import { sql } from 'drizzle-orm';
import { GpuplaneClient } from '../cli/client.ts';
import { createLogger } from '../cli/logger.ts';
import { openDatabase } from '../db/client.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { runSchedulePass } from '../db/queries/schedule.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { startApiServer } from '../api/server.ts';
import { startDevServer } from '../temporal/dev-server.ts';
import { connectClient, connectWorker, ensureNamespace } from '../temporal/setup.ts';
import { startControlWorker, workflowsPath } from '../workers/control/worker.ts';
import { startAgent, type Agent } from '../workers/gpu-host/agent.ts';
import { fakeGpus } from '../workers/gpu-host/inventory.ts';
import { createDatabase, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '1000' },
    'latency-samples': { type: 'string', default: '50' },
    queue: { type: 'string', default: '10000' },
  },
  strict: true,
});
const JOBS = Number(args.jobs);
const SAMPLES = Number(args['latency-samples']);
const QUEUE = Number(args.queue);
const SLURM_RATE = 500;

const say = (s: string) => process.stdout.write(`${s}\n`);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function pool<T>(items: T[], width: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (i < items.length) await fn(items[i++]);
  }));
}

async function main() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-'));
  const pgPort = await freePort();
  const tPort = await freePort();
  say(`bench/dispatch: ${JOBS} jobs a shape, ${SAMPLES} latency samples, ${QUEUE} queued for the pass; ${os.cpus().length} cores`);
  const pgc = await startThrowawayCluster(pgPort);
  const temporal = await startDevServer({ dbFile: path.join(scratch, 'temporal.db'), port: tPort, uiPort: null, logFile: path.join(scratch, 'temporal.log') });
  const connection = await connectWorker(temporal.address, createLogger('warn'));
  const results: string[] = [];
  try {
    // A fresh catalogue and namespace per shape, so one shape's leftovers do not slow the next.
    async function cluster(name: string, nodes: { id: string; gpus: number }[]) {
      await createDatabase(pgc.url('postgres'), name);
      const database = await openDatabase({ url: pgc.url(name), poolSize: 20 });
      await ensureNamespace(temporal.address, name);
      const t = await connectClient(temporal.address, name);
      const timeouts = { heartbeatTimeoutMs: 10_000, lostAfterMs: 60_000 };
      const control = await startControlWorker({ db: database.db, client: t.client, connection, namespace: name, backfillHoldMs: 300_000, timeouts });
      const api = await startApiServer({ db: database.db, client: t.client, timeouts }, '127.0.0.1', 0);
      const agents: Agent[] = [];
      for (const n of nodes) {
        agents.push(
          await startAgent({ nodeId: n.id, labels: {}, fakeGpus: n.gpus, client: t.client, connection, namespace: name, apiUrl: api.url, dataDir: path.join(scratch, name, n.id), heartbeatTimeoutMs: 10_000, lostAfterMs: 60_000, killGraceMs: 1000 }),
        );
      }
      const client = new GpuplaneClient(api.url);
      const deadline = Date.now() + 60_000;
      while ((await client.nodes()).filter((n) => n.status === 'ONLINE').length < nodes.length) {
        if (Date.now() > deadline) throw new Error('nodes did not come ONLINE');
        await new Promise((r) => setTimeout(r, 200));
      }
      return {
        db: database.db,
        client,
        async close() {
          await Promise.all(agents.map((a) => a.shutdown()));
          await api.close();
          await control.shutdown();
          await t.close();
          await database.close();
        },
      };
    }

    async function throughput(name: string, nodes: { id: string; gpus: number }[]) {
      const c = await cluster(name, nodes);
      const ids: string[] = [];
      const t0 = Date.now();
      await pool([...Array(JOBS).keys()], 32, async () => {
        ids.push((await c.client.submit({ type: 'CUSTOM', gpus: 1, command: ['true'], working_dir: '/tmp' })).id);
      });
      const submitted = Date.now();
      for (;;) {
        const r = (await c.db.execute(sql`select count(*)::int as n from jobs where state in ('SUCCEEDED','FAILED','CANCELLED')`)) as unknown as { rows: { n: number }[] };
        if (r.rows[0].n >= JOBS) break;
        await new Promise((res) => setTimeout(res, 200));
      }
      const r = (await c.db.execute(sql`select count(*) filter (where state = 'SUCCEEDED')::int as ok, max(ended_at) as last from jobs`)) as unknown as { rows: { ok: number; last: string }[] };
      const seconds = (new Date(r.rows[0].last).getTime() - t0) / 1000;
      await c.close();
      return { rate: JOBS / seconds, seconds, ok: r.rows[0].ok, submitSeconds: (submitted - t0) / 1000 };
    }

    // 1. submit→RUNNING latency on an idle cluster, one job at a time.
    {
      const c = await cluster('latency', [{ id: 'idle', gpus: 8 }]);
      const lat: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const j = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: ['true'], working_dir: '/tmp' });
        const d = await c.client.waitFor(j.id, undefined, 60_000, 20);
        const created = d.history.find((h) => h.to === 'CREATED')!;
        const running = d.history.find((h) => h.to === 'RUNNING')!;
        lat.push(new Date(running.at).getTime() - new Date(created.at).getTime());
      }
      await c.close();
      results.push(`submit→RUNNING, idle cluster (${SAMPLES} jobs, one at a time): p50 ${pct(lat, 50)} ms, p99 ${pct(lat, 99)} ms`);
      say(results.at(-1)!);
    }

    // 2. 1,000 no-work jobs on 50 fake nodes × 8 cards.
    const wide = await throughput('wide', Array.from({ length: 50 }, (_, i) => ({ id: `n${i}`, gpus: 8 })));
    results.push(`${JOBS} no-work jobs, 50 nodes × 8 cards: ${wide.rate.toFixed(1)} jobs/s (${wide.seconds.toFixed(1)} s first submit → last finish; submits took ${wide.submitSeconds.toFixed(1)} s; ${wide.ok} succeeded)`);
    say(results.at(-1)!);

    // 3. 1,000 one-card `true` jobs on one node of 8 cards (the single-Slurm-node shape).
    const single = await throughput('single', [{ id: 'one', gpus: 8 }]);
    results.push(`${JOBS} one-card \`true\` jobs, 1 node × 8 cards: ${single.rate.toFixed(1)} jobs/s (${single.seconds.toFixed(1)} s; ${single.ok} succeeded)`);
    say(results.at(-1)!);

    // 4. One scheduling pass with QUEUE jobs queued (rows written directly; the pass is what is timed).
    {
      await createDatabase(pgc.url('postgres'), 'pass');
      const database = await openDatabase({ url: pgc.url('pass') });
      for (let i = 0; i < 50; i++) await upsertNodeOnline(database.db, { nodeId: `p${i}`, hostname: 'h', labels: {}, gpus: fakeGpus(`p${i}`, 8) });
      await database.db.transaction(async (tx) => {
        for (let i = 0; i < QUEUE; i++) {
          const j = await insertJob(tx, { id: `q${String(i).padStart(6, '0')}`, type: 'CUSTOM', state: 'CREATED', gpus: 1 + (i % 4), selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, priority: i % 3 });
          void j;
        }
        await tx.execute(sql`update jobs set state = 'QUEUED', queued_at = now()`);
      });
      const t0 = performance.now();
      const placed = await runSchedulePass(database.db, 300_000);
      const full = performance.now() - t0;
      const t1 = performance.now();
      await runSchedulePass(database.db, 300_000);
      const scan = performance.now() - t1;
      await database.close();
      results.push(`one scheduling pass, ${QUEUE} queued, 400 free cards: ${full.toFixed(0)} ms placing ${placed.placements.length} jobs; ${scan.toFixed(0)} ms for the next pass (no free cards)`);
      say(results.at(-1)!);
    }

    // 5. The peer: bare Temporal, one workflow + one no-op activity per job, same servers.
    {
      const ns = 'peer';
      await ensureNamespace(temporal.address, ns);
      const t = await connectClient(temporal.address, ns);
      const worker = await Worker.create({
        connection,
        namespace: ns,
        taskQueue: 'peer',
        workflowsPath: new URL('./peer-workflow.ts', import.meta.url).pathname,
        activities: { noop: async () => undefined },
        maxConcurrentActivityTaskExecutions: 200,
      });
      const run = worker.run();
      const t0 = Date.now();
      await pool([...Array(JOBS).keys()], 32, async (i) => {
        await t.client.workflow.start('peerWorkflow', { workflowId: `peer-${i}`, taskQueue: 'peer' });
      });
      await pool([...Array(JOBS).keys()], 64, async (i) => {
        await t.client.workflow.getHandle(`peer-${i}`).result();
      });
      const rate = JOBS / ((Date.now() - t0) / 1000);
      worker.shutdown();
      await run;
      await t.close();
      results.push(`peer, bare Temporal (1 workflow + 1 no-op activity per job): ${rate.toFixed(1)} jobs/s`);
      say(results.at(-1)!);
      const best = Math.max(wide.rate, single.rate);
      results.push(
        `ratios: GPUPlane/bare Temporal ${(best / rate).toFixed(2)}; GPUPlane/Slurm's 500 jobs/s ${(best / SLURM_RATE).toFixed(3)} (Slurm is ${(SLURM_RATE / best).toFixed(1)}× faster)`,
      );
      say(results.at(-1)!);
    }
  } finally {
    await connection.close();
    await temporal.stop();
    pgc.remove();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  fs.mkdirSync(path.join(process.cwd(), 'bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join('bench', 'results', 'dispatch.txt'), `${new Date().toISOString()} ${os.cpus().length} cores\n${results.join('\n')}\n`);
  void workflowsPath;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
