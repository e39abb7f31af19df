/**
 * bench/dispatch: how fast jobs go from submit to RUNNING and through the system, beside the
 * peers that bound it, all in one run.
 *
 *   npm run bench:dispatch [-- --jobs 1000 --latency-samples 50 --queue 10000 --skip slurm,cluster,grid,peer --threads --profile DIR]
 *
 * --skip takes any of embedded, latency, pg, cluster, pass, grid, peer, slurm.
 *
 * Real parts, real processes: a throwaway PostgreSQL cluster and a Temporal dev server shared by
 * the shapes, and per shape `gpuctl control-worker`, `gpuctl api` and `gpuctl agent` processes
 * (test/support/cluster.ts), or one `gpuctl up` (the embedded default: PGlite and its own dev
 * server). The client is one script submitting over HTTP one request at a time, as a user's
 * loop would. The peers: Slurm from Debian on the same machine (bench/slurm-peer.ts), and bare
 * Temporal on the same server (one workflow with one no-op activity a job).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from '@temporalio/worker';
import { createLogger } from '../runtime/logger.ts';
import { connectClient, ensureNamespace } from '../temporal/setup.ts';
import { connectWorker } from '../temporal/worker-runtime.ts';
import { ManagedProcess, startCluster, type Cluster } from '../test/support/cluster.ts';
import { startSharedServices } from '../test/support/services.ts';
import { cpuPerJob, cpuSnapshot, pidsMatching, threadsOf } from './cpu.ts';
import { actionsPerJob, pct, pool, sequentialTrue, startEmbedded } from './dispatch-measures.ts';
import { measurePass, type PassFigure } from './schedule-pass.ts';
import { runSlurmPeer, type SlurmFigures } from './slurm-peer.ts';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '1000' },
    'latency-samples': { type: 'string', default: '50' },
    queue: { type: 'string', default: '10000' },
    skip: { type: 'string', default: '' },
    // CPU of each thread of our processes in the PostgreSQL shape (main, the workflow thread, the libuv pool, Temporal's core).
    threads: { type: 'boolean', default: false },
    // Each of our processes writes a V8 CPU profile into this folder when it exits (node --cpu-prof).
    profile: { type: 'string' },
  },
  strict: true,
});
const JOBS = Number(args.jobs);
const SAMPLES = Number(args['latency-samples']);
const QUEUE = Number(args.queue);
const skip = new Set(args.skip.split(',').filter(Boolean));
if (args.profile) process.env.GPUPLANE_PROFILE_DIR = args.profile;

const say = (s: string) => process.stdout.write(`${s}\n`);

const ms = (x: number) => `${x.toFixed(x < 10 ? 1 : 0)} ms`;

async function main() {
  say(`bench/dispatch: ${JOBS} jobs a shape, ${SAMPLES} latency samples, ${QUEUE} queued for the pass; ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB`);
  const services = await startSharedServices('bench-dispatch');
  const results: string[] = [];
  const note = (s: string) => {
    results.push(s);
    say(s);
  };
  const figures: Record<string, number> = {};
  const cluster = (name: string, extra: Partial<Parameters<typeof startCluster>[1]> = {}) =>
    startCluster(name, { agents: [{ nodeId: 'one', gpus: 8 }], heartbeatTimeoutS: 10, lostAfterS: 60, ...extra }, services);
  try {
    // 1. The public path on the embedded default: `gpuctl up` (PGlite), one client, one POST at a time.
    if (!skip.has('embedded')) {
      const e = await startEmbedded(services.scratch);
      try {
        const idle: number[] = [];
        for (let i = 0; i < SAMPLES; i++) {
          const a = performance.now();
          const j = await e.client.submit({ type: 'CUSTOM', gpus: 1, command: ['true'], working_dir: '/tmp' });
          idle.push(performance.now() - a);
          await e.client.waitFor(j.id, undefined, 60_000, 20);
        }
        note(`embedded (gpuctl up, PGlite): POST /jobs on an idle plane p50 ${ms(pct(idle, 50))}, p99 ${ms(pct(idle, 99))}`);
        figures.postIdleP50 = pct(idle, 50);
        const r = await sequentialTrue(e.client, JOBS);
        note(`embedded (gpuctl up, PGlite): ${JOBS} one-card \`true\` jobs on 1 node × 8 cards, one client POSTing one at a time: ${r.rate.toFixed(1)} jobs/s (${r.seconds.toFixed(1)} s, ${r.ok} succeeded); POST p50 ${ms(r.post.p50)}, p99 ${ms(r.post.p99)} under that load`);
        figures.embedded = r.rate;
      } finally {
        await e.stop();
      }
    }

    // 2. submit → RUNNING on an idle cluster (PostgreSQL, dev server), one job at a time.
    if (!skip.has('latency')) {
      const c = await cluster('latency');
      const lat: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const j = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: ['true'], working_dir: '/tmp' });
        const d = await c.client.waitFor(j.id, undefined, 60_000, 20);
        const created = d.history.find((h) => h.to === 'CREATED')!;
        const running = d.history.find((h) => h.to === 'RUNNING')!;
        lat.push(new Date(running.at).getTime() - new Date(created.at).getTime());
      }
      await c.stop();
      note(`submit → RUNNING, idle cluster (PostgreSQL, dev server; ${SAMPLES} jobs one at a time): p50 ${ms(pct(lat, 50))}, p99 ${ms(pct(lat, 99))}`);
    }

    // 3. The same throughput shape on PostgreSQL and the dev server, with the cost of a job in Temporal actions.
    if (!skip.has('pg')) {
      const c = await cluster('single');
      const roles = () => ({
        'control worker': [c.control.pid!],
        API: [c.api.pid!],
        'agent (with its shims and jobs)': [...c.agents.values()].map((a) => a.pid!),
        'Temporal server': pidsMatching('start-dev', `--port ${services.temporalAddress.split(':').pop()} `),
        PostgreSQL: pidsMatching('bin/postgres', services.pgDir),
        'bench client': [process.pid],
      });
      const before = cpuSnapshot(roles());
      const threadsBefore = args.threads ? [c.control.pid!, c.api.pid!, ...[...c.agents.values()].map((a) => a.pid!)].map(threadsOf) : [];
      const r = await sequentialTrue(c.client, JOBS);
      if (args.threads) {
        [c.control.pid!, c.api.pid!, ...[...c.agents.values()].map((a) => a.pid!)].forEach((pid, i) => {
          const now = threadsOf(pid);
          say(`  threads of ${['control worker', 'API', 'agent'][i] ?? pid}: ${Object.entries(now).map(([k, v]) => `${k} ${((v - (threadsBefore[i][k] ?? 0)) / JOBS).toFixed(1)}`).join(', ')}`);
        });
      }
      const cpu = cpuPerJob(before, cpuSnapshot(roles()), JOBS);
      const a = await actionsPerJob(services.temporalAddress, c.namespace, r.ids);
      await c.stop();
      note(`PostgreSQL + dev server: ${JOBS} one-card \`true\` jobs on 1 node × 8 cards, one client one POST at a time: ${r.rate.toFixed(1)} jobs/s (${r.seconds.toFixed(1)} s, ${r.ok} succeeded); POST p50 ${ms(r.post.p50)}`);
      note(
        `per job in Temporal (mean of the last 20 jobs' histories): ${a.events} history events, ${a.workflowTasks} workflow tasks, ${a.activities} activity, ${a.signals} signal, ${a.localActivities} local activities (database writes), ${a.searchAttributeUpserts} search-attribute upserts`,
      );
      note(`  CPU per job in that run (/proc, each process and its children): ${cpu.text}`);
      figures.pg = r.rate;
    }

    // 4. A real Temporal cluster (temporal-server on PostgreSQL, 4 history shards), with 1 and 2 control workers.
    if (!skip.has('cluster')) {
      for (const workers of [1, 2]) {
        const c: Cluster = await cluster(`cluster${workers}`, { realTemporal: { numHistoryShards: 4 } });
        const extra: ManagedProcess[] = [];
        for (let i = 1; i < workers; i++) {
          const p = new ManagedProcess(`control worker ${i + 1}`, ['control-worker'], c.env, 'control worker polling');
          await p.start();
          extra.push(p);
        }
        const r = await sequentialTrue(c.client, JOBS);
        await Promise.all(extra.map((p) => p.kill('SIGTERM')));
        await c.stop();
        note(`real Temporal cluster (temporal-server 1.27.2 on PostgreSQL, 4 shards), ${workers} control worker${workers > 1 ? 's' : ''}: ${r.rate.toFixed(1)} jobs/s (${r.ok} succeeded); POST p50 ${ms(r.post.p50)}`);
        figures[`cluster${workers}`] = r.rate;
      }
    }

    // 5. One scheduling pass: 10,000 queued on 1,000 nodes × 8 cards with 10 % free, and how it grows.
    if (!skip.has('pass')) {
      const url = (db: string) => `postgres://postgres@127.0.0.1:${services.pgPort}/${db}`;
      const main: PassFigure = await measurePass(url, url('postgres'), { nodes: 1000, queued: QUEUE, free: 0.1 });
      note(`one scheduling pass, ${QUEUE} queued, 1,000 nodes × 8 cards with 10 % free: ${main.medianMs} ms (placing ${main.placed})`);
      if (!skip.has('grid')) {
        const grow: string[] = [];
        for (const queued of [1000, 50_000]) grow.push(`${queued} queued ${(await measurePass(url, url('postgres'), { nodes: 1000, queued, free: 0.1 })).medianMs} ms`);
        for (const nodes of [100, 4000]) grow.push(`${nodes} nodes ${(await measurePass(url, url('postgres'), { nodes, queued: QUEUE, free: 0.1 })).medianMs} ms`);
        note(`  growth (other things as above): ${grow.join(', ')}`);
      }
    }

    // 6. The peer on the same server: bare Temporal, one workflow + one no-op activity per job.
    if (!skip.has('peer')) {
      const ns = 'peer';
      await ensureNamespace(services.temporalAddress, ns);
      const t = await connectClient(services.temporalAddress, ns);
      const connection = await connectWorker(services.temporalAddress, createLogger('warn'));
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
      for (let i = 0; i < JOBS; i++) await t.client.workflow.start('peerWorkflow', { workflowId: `peer-${i}`, taskQueue: 'peer' });
      await pool([...Array(JOBS).keys()], 64, async (i) => {
        await t.client.workflow.getHandle(`peer-${i}`).result();
      });
      const rate = JOBS / ((Date.now() - t0) / 1000);
      worker.shutdown();
      await run;
      await connection.close();
      await t.close();
      note(`peer, bare Temporal on the same dev server (1 workflow + 1 no-op activity a job, started one at a time): ${rate.toFixed(1)} jobs/s`);
      figures.bare = rate;
    }
  } finally {
    await services.stop();
  }

  // 7. The peer on its own ground: Slurm from Debian, 1 node × 8 GPUs, tuned.
  let slurm: SlurmFigures | { unavailable: string } | null = null;
  if (!skip.has('slurm')) {
    slurm = await runSlurmPeer({ jobs: JOBS, latencySamples: SAMPLES, log: (s) => process.stderr.write(`${s}\n`) });
    if ('unavailable' in slurm) note(`Slurm: not measured here (${slurm.unavailable})`);
    else {
      note(`peer, Slurm ${slurm.version} (1 node × 8 GPUs as gres, tuned): ${slurm.loopJobsPerS.toFixed(1)} jobs/s for ${JOBS} × \`sbatch --gres=gpu:1 --wrap=true\` in a loop, ${slurm.arrayJobsPerS.toFixed(1)} jobs/s as one --array; submit → start p50 ${ms(slurm.submitToStart.p50Ms)}, p99 ${ms(slurm.submitToStart.p99Ms)}`);
    }
  }
  const ratios: string[] = [];
  if (slurm && !('unavailable' in slurm)) {
    ratios.push(`embedded/Slurm loop ${(figures.embedded / slurm.loopJobsPerS).toFixed(2)}`, `PostgreSQL/Slurm loop ${(figures.pg / slurm.loopJobsPerS).toFixed(2)}`);
    if (figures.cluster2) ratios.push(`cluster (2 control workers)/Slurm loop ${(figures.cluster2 / slurm.loopJobsPerS).toFixed(2)}`);
  }
  if (figures.bare) ratios.push(`PostgreSQL/bare Temporal ${(figures.pg / figures.bare).toFixed(2)}`);
  if (ratios.length) note(`ratios: ${ratios.join('; ')}`);

  fs.mkdirSync(path.join(process.cwd(), 'bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join('bench', 'results', 'dispatch.txt'), `${new Date().toISOString()} ${os.cpus().length} cores\n${results.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
