/**
 * bench/chaos: 200 jobs on 10 fake nodes while agents and the control worker are SIGKILLed and
 * restarted at random, and the control plane itself fails: the Temporal server and PostgreSQL
 * are paused (SIGSTOP for 5-60 s, connections left open) or killed and started again. A share of
 * the jobs (`--gang-share`, 0.2) are 2-node gangs of one card a node. Prints jobs lost, duplicate
 * concurrent attempts, double-owned cards and the mean time from an agent kill to the re-queue of
 * its attempts, on the default timing (heartbeat 10 s, lost-after 75 s).
 *
 *   npm run bench:chaos [-- --jobs 200 --nodes 10 --gang-share 0.2 --seed 7 --heartbeat-timeout 10 --lost-after 75]
 *
 * Every part is real and separate: a throwaway PostgreSQL and a Temporal dev server of the
 * run's own, and `gpuctl control-worker`, `gpuctl api` and one `gpuctl agent` process per node.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startCluster, type ManagedProcess } from '../test/support/cluster.ts';
import { sampleOwnership } from '../test/support/ownership.ts';
import { overlappingAttempts, recorderScript } from '../test/support/recorder.ts';
import { startSharedServices } from '../test/support/services.ts';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '200' },
    nodes: { type: 'string', default: '10' },
    'gang-share': { type: 'string', default: '0.2' },
    seed: { type: 'string', default: '7' },
    'heartbeat-timeout': { type: 'string', default: '10' },
    'lost-after': { type: 'string', default: '75' },
  },
  strict: true,
});
const JOBS = Number(args.jobs);
const NODES = Number(args.nodes);
const GANG_SHARE = Number(args['gang-share']);
const HB = Number(args['heartbeat-timeout']);
const LOST_AFTER = Number(args['lost-after']);
let seed = Number(args.seed);
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const say = (s: string) => process.stdout.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function recorder(dir: string): string {
  return recorderScript(dir, 1 + Math.floor(rand() * 4));
}

async function main() {
  // Jobs run as the agent's user (as under vitest): as root, an agent runs them as a job user, who
  // could not write their records into this run's private folder.
  process.env.GPUPLANE_JOB_USERS ??= 'agent';
  const services = await startSharedServices('chaos');
  say(`bench/chaos: ${JOBS} jobs (${Math.round(GANG_SHARE * 100)} % 2-node gangs), ${NODES} nodes × 2 cards, heartbeat timeout ${HB} s, lost-after ${LOST_AFTER} s, seed ${args.seed}`);

  // The cluster's own Temporal server and PostgreSQL, so that the chaos can pause and kill them.
  const c = await startCluster(
    'chaos',
    { heartbeatTimeoutS: HB, lostAfterS: LOST_AFTER, ownTemporal: {}, ownPostgres: true, agents: Array.from({ length: NODES }, (_, i) => ({ nodeId: `c${i}`, gpus: 2 })) },
    services,
  );
  const out = path.join(c.work, 'spans');
  fs.mkdirSync(out);
  // A pool rides out PostgreSQL's restarts; a query that fails is asked again.
  const pool = new pg.Pool({ connectionString: c.dbUrl, max: 2 });
  pool.on('error', () => undefined);
  const db = {
    async query<R extends pg.QueryResultRow>(text: string): Promise<pg.QueryResult<R>> {
      for (;;) {
        try {
          return await pool.query<R>(text);
        } catch {
          await sleep(500);
        }
      }
    },
  };

  const ids: string[] = [];
  let gangs = 0;
  for (let i = 0; i < JOBS; i++) {
    const shape = rand() < GANG_SHARE ? (gangs++, { nodes: 2, gpus_per_node: 1 }) : { gpus: 1 };
    ids.push((await c.client.submit({ type: 'TRAIN', ...shape, command: recorder(out), max_lost_requeues: 20 })).id);
  }
  const t0 = Date.now();

  // Chaos: every 1.5-4 s kill an agent (back after 2-8 s), or the control worker, or the control
  // plane: pause the Temporal server or PostgreSQL for 5-60 s, or kill one and start it 2-20 s later.
  const kills: { node: string; at: number }[] = [];
  let killsControl = 0;
  const outages: string[] = [];
  let doubleOwned = 0;
  let twoLive = 0;
  let mismatch = 0;
  let samples = 0;
  let stop = false;
  const restarts: Promise<void>[] = [];
  const chaos = (async () => {
    while (!stop) {
      await sleep(1500 + rand() * 2500);
      if (stop) break;
      const dice = rand();
      if (dice < 0.12) {
        const seconds = 5 + Math.floor(rand() * 56);
        const target = rand() < 0.5 ? 'Temporal' : 'PostgreSQL';
        const kill = rand() < 0.35;
        const started = Date.now();
        if (target === 'Temporal' && kill) await c.temporal!.restart(Math.min(seconds, 20) * 1000);
        else if (target === 'Temporal') {
          const pid = c.temporal!.server.child.pid!;
          process.kill(pid, 'SIGSTOP');
          await sleep(seconds * 1000);
          process.kill(pid, 'SIGCONT');
        } else if (kill) {
          c.postgres!.stop('immediate');
          await sleep(Math.min(seconds, 20) * 1000);
          await c.postgres!.start();
        } else {
          c.postgres!.signalAll('SIGSTOP');
          await sleep(seconds * 1000);
          c.postgres!.signalAll('SIGCONT');
        }
        outages.push(`${target} ${kill ? 'killed' : 'paused'} ${((Date.now() - started) / 1000).toFixed(0)} s`);
        continue;
      }
      if (dice < 0.3) {
        await c.control.kill('SIGKILL');
        killsControl++;
        await sleep(1000 + rand() * 2000);
        await c.control.start();
        continue;
      }
      const node = `c${Math.floor(rand() * NODES)}`;
      const agent = c.agents.get(node) as ManagedProcess;
      if (!agent.child || agent.child.exitCode !== null || agent.child.signalCode !== null) continue;
      await agent.kill('SIGKILL');
      kills.push({ node, at: Date.now() });
      const back = 2000 + rand() * 6000;
      // An agent that comes back during a control-plane outage waits for it; one that gave up
      // waiting is started again.
      restarts.push(sleep(back).then(async () => {
        for (;;) {
          try {
            return await agent.start();
          } catch {
            await agent.kill('SIGKILL');
          }
        }
      }));
    }
  })();
  // Watch for two live attempts holding the same card (a gang's on each of its nodes), two live
  // attempts of one job, or a card held against gpu_slots, every 250 ms, from the catalogue.
  const watch = (async () => {
    while (!stop) {
      const s = await sampleOwnership((text) => db.query(text));
      doubleOwned += s.doubleOwned;
      twoLive += s.twoLiveAttempts;
      mismatch += s.ownerMismatch;
      samples++;
      await sleep(250);
    }
  })();

  for (;;) {
    const r = await db.query<{ n: number }>(`select count(*)::int as n from jobs where state in ('SUCCEEDED', 'FAILED', 'CANCELLED')`);
    if (r.rows[0].n >= JOBS || Date.now() - t0 > 15 * 60_000) break;
    await sleep(1000);
  }
  stop = true;
  await chaos;
  await watch;
  await Promise.all(restarts);
  const seconds = (Date.now() - t0) / 1000;

  const states = await db.query<{ state: string; n: number }>(`select state, count(*)::int as n from jobs group by state`);
  const lost = JOBS - (states.rows.find((s) => s.state === 'SUCCEEDED')?.n ?? 0);

  // Duplicate concurrent attempts: processes of two attempts of one job alive at the same time.
  let duplicates = 0;
  for (const id of ids) duplicates += overlappingAttempts(out, id);
  const recorded = fs.readdirSync(out).length;

  // Kill → re-queue: for each agent kill, its attempts' LOST → next QUEUED transition (a gang's
  // attempt is lost with any of its members' nodes).
  const lostRows = await db.query<{ job_id: string; attempt: number; nodes: string[]; requeued: Date }>(`
    select a.job_id, a.attempt, coalesce((select array_agg(m->>'node_id') from jsonb_array_elements(a.members) m), array[a.node_id]) as nodes, t.at as requeued
    from job_attempts a join job_transitions t on t.job_id = a.job_id and t.attempt = a.attempt + 1 and t.to_state = 'QUEUED'
    where a.state = 'LOST'`);
  const gaps: number[] = [];
  for (const row of lostRows.rows) {
    const k = kills.filter((x) => row.nodes.includes(x.node) && x.at <= row.requeued.getTime()).at(-1);
    if (k) gaps.push(row.requeued.getTime() - k.at);
  }
  const mean = gaps.length ? gaps.reduce((a, b) => a + b, 0) / gaps.length : NaN;
  const attempts = await db.query<{ n: number }>(`select count(*)::int as n from job_attempts`);
  const reattached = await db.query<{ n: number }>(`select count(*)::int as n from job_transitions where detail like '%re-attached%'`);

  const end = await sampleOwnership((text) => db.query(text));
  const lines = [
    `${JOBS} jobs (${gangs} of them 2-node gangs) in ${seconds.toFixed(0)} s; ${kills.length} agent kills, ${killsControl} control-worker kills; ${attempts.rows[0].n} attempts (${lostRows.rows.length} LOST and re-queued, ${reattached.rows[0].n} re-attached by a restarted agent)`,
    `control-plane outages: ${outages.length ? outages.join(', ') : 'none'}`,
    `jobs lost: ${lost} (${states.rows.map((s) => `${s.state} ${s.n}`).join(', ')})`,
    `duplicate concurrent attempts: ${duplicates} (from ${recorded} process records)`,
    `double-owned cards: ${doubleOwned}; jobs with two live attempts: ${twoLive}; cards held against gpu_slots: ${mismatch} (in ${samples} samples); cards owned at the end: ${end.owned}`,
    `mean kill → re-queue: ${gaps.length ? `${(mean / 1000).toFixed(1)} s over ${gaps.length} attempts` : 'no attempt was LOST'} (heartbeat timeout ${HB} s, lost-after ${LOST_AFTER} s)`,
  ];
  const lostReasons = await db.query<{ job_id: string; attempt: number; reason: string | null }>(`select job_id, attempt, reason from job_attempts where state = 'LOST'`);
  for (const r of lostReasons.rows) lines.push(`  LOST: ${r.job_id} attempt ${r.attempt}: ${r.reason ?? ''}`);
  const bad = await db.query<{ id: string; state: string; attempt: number; reason: string | null }>(`select id, state, attempt, reason from jobs where state <> 'SUCCEEDED'`);
  for (const b of bad.rows) lines.push(`  not succeeded: ${b.id} ${b.state} attempt ${b.attempt}: ${b.reason ?? ''}`);
  for (const l of lines) say(l);
  fs.mkdirSync(path.join('bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join('bench', 'results', 'chaos.txt'), `${new Date().toISOString()}\n${lines.join('\n')}\n`);

  await pool.end();
  await c.stop();
  await services.stop();
  if (lost || duplicates || doubleOwned || twoLive || mismatch || end.owned) process.exitCode = 1;
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
