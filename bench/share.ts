/**
 * bench/share: what sharing the cluster costs (quotas, fair share, preemption), each figure beside
 * a peer measured in the same run.
 *
 *   node --import tsx bench/share.ts [--runs 5 --graces 0,5 --pass-repeat 5 --skip-latency --skip-pass]
 *
 *  - Preemption latency: on one fake node of 4 cards, a low-priority job that ignores SIGTERM
 *    holds every card (so each preemption waits out the whole grace); a job of higher priority
 *    is submitted, and the figure is its submit → its RUNNING (the API's started_at), with the
 *    victim's grace at each of `--graces`. Aim: grace + 1 s. Peer: the same job submitted to
 *    an idle node, submit → RUNNING: what a start costs without a preemption.
 *  - The scheduling pass with quotas and preemption: 1,000 nodes × 8 cards, 10 % free, 10,000
 *    queued jobs in 20 projects, each with a quota of 400 cards; the running jobs are spread over
 *    the projects unevenly, so that some borrow and the queue's within-quota jobs preempt (the
 *    pass, scheduler/pass.ts, with its preemption step on); median of `--pass-repeat`
 *    passes, each rolled back, the usage read every pass. Aim: ≤ 150 ms. Also the same on fresh
 *    rows as the scheduler runs it: after two passes not timed (its code compiled, its caches
 *    filled), the usage read through a UsageCache (once every 30 s), and the queue and the running
 *    attempts through a PassCache (db/queries/pass-cache.ts: only the rows changed since the last
 *    pass are read in full), on the pool as the scheduler runs it: its reads side by side, its
 *    plan applied in two transactions at once (each rolled back here). Since the passes are rolled back, before each one 200 queued jobs and
 *    800 running jobs' attempts are rewritten (untimed), about what a pass placing 800 jobs leaves
 *    changed, so that the cache reads again what it would in a busy scheduler; and once more with
 *    nothing rewritten (a pass soon after another on a quiet cluster). Beside each median,
 *    the CPU a pass costs, which other work on the machine changes less than the wall time: node's
 *    (process.cpuUsage, all its threads; median) and the pass's PostgreSQL backends' (/proc; mean).
 *    Peer: the same rows with no project and no quota (the plain order; only priority preempts).
 *
 * The utilisation over a simulated mixed workload is bench/share-sim.ts (the pure rules, clock
 * compressed). Real processes here: a throwaway PostgreSQL, a Temporal dev server, `gpuctl
 * control-worker`, `gpuctl api` and `gpuctl agent --fake-gpus` (all on this machine).
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import { openDatabase, queryRows, type Db, type Executor } from '../db/client.ts';
import { UsageCache } from '../db/queries/quotas.ts';
import { PassCache } from '../db/queries/pass-cache.ts';
import { runSchedulePass, type PassOutcome, type PassPhases, type Transaction } from '../scheduler/pass.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { createDatabase, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';
import { fill } from './pass-shape.ts';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    graces: { type: 'string', default: '0,5' },
    'pass-repeat': { type: 'string', default: '5' },
    'skip-latency': { type: 'boolean', default: false },
    'skip-pass': { type: 'boolean', default: false },
  },
  strict: true,
});
const RUNS = Number(args.runs);
const GRACES = args.graces.split(',').map(Number);
const say = (s: string) => process.stdout.write(`${s}\n`);

/** Nearest-rank percentile of a sorted copy. */
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** Submit → RUNNING (the API's started_at) of a 4-card job of priority 5. */
async function startOf(c: Cluster, selector: Record<string, string>): Promise<number> {
  const t0 = Date.now();
  const j = await c.client.submit({ type: 'CUSTOM', gpus: 4, priority: 5, selector, command: 'true' });
  const done = await c.client.waitFor(j.id, undefined, 120_000);
  if (done.state !== 'SUCCEEDED') throw new Error(`${j.id} ended ${done.state}: ${done.reason ?? ''}`);
  return Date.parse(done.attempts[0].started_at!) - t0;
}

async function latency(c: Cluster): Promise<void> {
  const peer: number[] = [];
  for (const grace of GRACES) {
    const got: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      // The victim ignores SIGTERM in its first attempt (the whole grace is waited out) and ends at once in its next.
      const low = await c.client.submit({ type: 'CUSTOM', gpus: 4, selector: { role: 'victim' }, preempt_grace_s: grace, command: `if [ "$GPUPLANE_ATTEMPT" = 1 ]; then trap '' TERM; sleep 600; fi` });
      await c.client.waitFor(low.id, ['RUNNING'], 60_000);
      got.push(await startOf(c, { role: 'victim' }));
      const v = await c.client.waitFor(low.id, undefined, 60_000);
      if (v.attempts[0].state !== 'PREEMPTED') throw new Error(`victim ${low.id}: attempt 1 ended ${v.attempts[0].state}`);
      if (process.env.SHARE_DEBUG) for (const h of v.history) say(`  ${h.at} ${h.attempt} ${h.from}→${h.to} ${h.detail ?? ''}`);
      if (grace === GRACES[0]) peer.push(await startOf(c, { role: 'idle' }));
    }
    say(`preemption latency, grace ${grace} s, ${RUNS} runs (submit → RUNNING, the victim ignoring SIGTERM): p50 ${secs(pct(got, 50))}, max ${secs(Math.max(...got))}; aim ≤ grace + 1 s = ${grace + 1} s; p50 - grace ${secs(pct(got, 50) - grace * 1000)}`);
  }
  say(`  peer: the same job on an idle node, submit → RUNNING: p50 ${secs(pct(peer, 50))}, max ${secs(Math.max(...peer))}`);
}

class Rollback extends Error {}

/** Transactions on `db` that are rolled back once done: what they did is returned, and undone. */
function rolledBack(db: Db): Transaction {
  return async <T>(fn: (tx: Executor) => Promise<T>): Promise<T> => {
    let out: { value: T } | undefined;
    await db
      .transaction(async (tx) => {
        out = { value: await fn(tx) };
        throw new Rollback();
      })
      .catch((err: unknown) => {
        if (!(err instanceof Rollback)) throw err;
      });
    return out!.value;
  };
}

/** How many queued and running jobs change between two of the scheduler's passes here: about what a pass that places 800 jobs leaves changed. */
const CHURN_QUEUED = 200;
const CHURN_RUNNING = 800;

/** Rewrites CHURN_QUEUED queued jobs' rows and CHURN_RUNNING running jobs' attempts, unchanged in value: the PassCache reads them again. */
async function churn(db: Db, queued = CHURN_QUEUED, running = CHURN_RUNNING): Promise<void> {
  if (queued > 0) await db.execute(sql`update jobs set priority = priority where id in (select id from jobs where state = 'QUEUED' order by random() limit ${queued})`);
  if (running > 0) await db.execute(sql`update job_attempts a set state = a.state from (select id, attempt from jobs where state = 'RUNNING' order by random() limit ${running}) r where a.job_id = r.id and a.attempt = r.attempt`);
}

/** Projects p00..p19, quotas of 400 cards; the queue's jobs round-robin over them, the running ones skewed (p00 holds the most). */
async function spreadOverProjects(db: Db): Promise<void> {
  await db.execute(sql`insert into projects (id, name) select 'p' || lpad(i::text, 2, '0'), 'p' || lpad(i::text, 2, '0') from generate_series(0, 19) i`);
  await db.execute(sql`insert into project_quotas (project_id, pool, gpus, set_by) select id, '', 400, 'bench' from projects`);
  await db.execute(sql`update jobs set project_id = 'p' || lpad((substr(id, 2)::int % 20)::text, 2, '0') where state = 'QUEUED'`);
  // Running job i goes to project floor(20 * (i / n)^2): the first projects hold far more than 400 cards, the last ones little.
  await db.execute(sql`
    update jobs j set project_id = 'p' || lpad(least(19, floor(20 * power(r.rn::float8 / r.n, 2)))::int::text, 2, '0')
    from (select id, row_number() over (order by id) - 1 as rn, count(*) over () as n from jobs where state = 'RUNNING') r
    where j.id = r.id`);
  await db.execute(sql`update job_attempts a set started_at = now() - make_interval(secs => (substr(a.job_id, 2)::int % 3600)) from jobs j where j.id = a.job_id and j.state = 'RUNNING'`);
  await db.execute(sql`analyze`);
}

/**
 * The median of `repeat` passes, each rolled back, after `warmup` passes not timed. `scheduler`: as the scheduler runs passes
 * (activities/control/scheduling.ts): the usage read through its UsageCache, the queue and the running attempts through
 * its PassCache, and before each pass, untimed, CHURN_QUEUED queued jobs and CHURN_RUNNING running ones rewritten (the same
 * values, a new row version), so that the cache reads again what a pass after a busy one would; absent: all read every pass.
 */
async function timePasses(db: Db, repeat: number, scheduler?: { usageCache: UsageCache; cache: PassCache; churn?: [number, number] }, warmup = 0): Promise<PassFigures> {
  const times: number[] = [];
  const nodeCpu: number[] = [];
  const pgCpu: number[] = [];
  let placed = 0;
  let preempted = 0;
  let phases: PassPhases = { queue: 0, rooms: 0, share: 0, plan: 0, apply: 0 };
  // The pass's backends: its transaction's, or (as the scheduler runs it, on the pool) all those it reads and writes on.
  const backends = async (ex: Executor) => (await queryRows<{ pid: number }>(ex, sql`select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`)).map((r) => r.pid);
  for (let i = -warmup; i < repeat; i++) {
    if (scheduler) await churn(db, ...(scheduler.churn ?? [CHURN_QUEUED, CHURN_RUNNING]));
    const p: PassPhases = { queue: 0, rooms: 0, share: 0, plan: 0, apply: 0, preempt: 0 };
    const timed = async (ex: Executor, run: () => Promise<PassOutcome>) => {
      const pg0 = new Map((await backends(ex)).map((pid) => [pid, backendCpuMs(pid)]));
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const r = await run();
      if (i >= 0) {
        times.push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        nodeCpu.push((c.user + c.system) / 1000);
        // A backend started during the pass: all its time is the pass's.
        pgCpu.push((await backends(ex)).reduce((sum, pid) => sum + backendCpuMs(pid) - (pg0.get(pid) ?? 0), 0));
      }
      placed = r.placements.length;
      preempted = r.preemptions.length;
      phases = p;
    };
    if (scheduler) {
      // On the pool, as the scheduler: each of the pass's transactions rolled back.
      await timed(db, () => runSchedulePass(db, 300_000, new Date(), p, { preemptGraceS: 30, ...scheduler, transaction: rolledBack(db) }));
    } else {
      // In one transaction of the bench's, rolled back: the pass's own is a savepoint in it.
      await rolledBack(db)((tx) => timed(tx, () => runSchedulePass(tx as unknown as Db, 300_000, new Date(), p, { preemptGraceS: 30 })));
    }
  }
  return { medianMs: Math.round(pct(times, 50)), nodeCpuMs: Math.round(pct(nodeCpu, 50)), pgCpuMs: Math.round(pgCpu.reduce((a, b) => a + b, 0) / pgCpu.length), placed, preempted, phases };
}

interface PassFigures {
  medianMs: number;
  /** node's CPU a pass (all its threads), the median. */
  nodeCpuMs: number;
  /** The pass's PostgreSQL backends' CPU a pass (its transaction's and those it reads beside it on), the mean (the kernel counts it in 10 ms ticks); NaN where /proc cannot tell. */
  pgCpuMs: number;
  placed: number;
  preempted: number;
  phases: PassPhases;
}

/** The CPU time a PostgreSQL backend has spent (user + system), from /proc (this machine's throwaway cluster); NaN elsewhere. */
function backendCpuMs(pid: number): number {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}
/** The kernel's clock ticks a second (USER_HZ), 100 on Linux. */
const CLOCK_TICKS = 100;

async function pass(pgUrl: (db: string) => string, adminUrl: string): Promise<void> {
  const repeat = Number(args['pass-repeat']);
  const shape = { nodes: 1000, queued: 10_000, free: 0.1 };
  // Each on fresh rows: a rolled-back pass leaves dead rows behind, which later passes would read.
  // `scheduler`: as the scheduler runs passes, its code already compiled (two passes not timed)
  // and the usage read through its UsageCache.
  // The last: as the scheduler runs it, with nothing changed between passes (a pass soon after another on a quiet cluster).
  const runs = [
    { shared: true, scheduler: false },
    { shared: true, scheduler: true },
    { shared: false, scheduler: false },
    { shared: true, scheduler: true, quiet: true },
  ];
  const figures = [];
  for (const { shared, scheduler, quiet } of runs) {
    const name = `share_${shared ? 'quotas' : 'plain'}${scheduler ? '_scheduler' : ''}_${Date.now() % 100000}`;
    await createDatabase(adminUrl, name);
    const database = await openDatabase({ url: pgUrl(name) });
    try {
      await fill(database.db, shape);
      // The running jobs' rows name their node and card, as a real placement's do (fill sets only gpu_slots).
      await database.db.execute(sql`update jobs j set node_id = s.node_id, gpu_indices = jsonb_build_array(s.index) from gpu_slots s where s.owner_job_id = j.id`);
      if (shared) await spreadOverProjects(database.db);
      figures.push(scheduler ? await timePasses(database.db, repeat, { usageCache: new UsageCache(), cache: new PassCache(), churn: quiet ? [0, 0] : undefined }, 2) : await timePasses(database.db, repeat));
    } finally {
      await database.close();
    }
  }
  const [q, scheduler, plain, quietScheduler] = figures;
  const ph = (p: PassPhases) => `queue ${p.queue.toFixed(0)}, rooms ${p.rooms.toFixed(0)}, share ${p.share.toFixed(0)}, plan ${p.plan.toFixed(0)}, apply ${p.apply.toFixed(0)}, preempt ${(p.preempt ?? 0).toFixed(0)}`;
  const cpu = (f: PassFigures) => `CPU a pass: node ${f.nodeCpuMs} ms, PostgreSQL ${f.pgCpuMs} ms`;
  say(`scheduling pass, 1,000 nodes × 8 cards, 10 % free, 10,000 queued in 20 projects with quotas of 400, preemption on: median ${q.medianMs} ms of ${repeat} (aim ≤ 150 ms); placed ${q.placed}, preempted ${q.preempted}; last pass ${ph(q.phases)} ms; ${cpu(q)}`);
  say(`  as the scheduler runs it (fresh rows; its code compiled by two passes not timed; the usage read through its UsageCache on the first of them, decayed after, as it does for 30 s; the queue and the running attempts through its PassCache, ${CHURN_QUEUED} queued and ${CHURN_RUNNING} running jobs changed before each pass; its reads side by side and its plan applied in two transactions at once, on the pool): median ${scheduler.medianMs} ms; last pass ${ph(scheduler.phases)} ms; ${cpu(scheduler)}`);
  say(`  as the scheduler runs it with nothing changed between passes (its PassCache reads no row again): median ${quietScheduler.medianMs} ms; last pass ${ph(quietScheduler.phases)} ms; ${cpu(quietScheduler)}`);
  say(`  peer: the same rows, no project and no quota: median ${plain.medianMs} ms (placed ${plain.placed}, preempted ${plain.preempted}; ${cpu(plain)}); quotas / plain ${(q.medianMs / plain.medianMs).toFixed(2)}×`);
}

async function main(): Promise<void> {
  if (!args['skip-pass']) {
    const pgc = await startThrowawayCluster(await freePort());
    try {
      await pass(pgc.url, pgc.url('postgres'));
    } finally {
      pgc.remove();
    }
  }
  if (args['skip-latency']) return;
  const services = await startSharedServices('share');
  try {
    {
      const c = await startCluster('share', { agents: [{ nodeId: 'victim', gpus: 4, labels: { role: 'victim' } }, { nodeId: 'idle', gpus: 4, labels: { role: 'idle' } }] }, services);
      try {
        await until('nodes ONLINE', async () => (await c.client.nodes()).filter((n) => n.status === 'ONLINE').length === 2, 60_000);
        await latency(c);
      } finally {
        await c.stop();
      }
    }
  } finally {
    await services.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench/share: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
