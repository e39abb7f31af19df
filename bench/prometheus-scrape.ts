/**
 * bench/prometheus-scrape: what one GET /metrics scrape costs at `jobs` jobs (20 projects, every
 * state, three history lines each) and `nodes` nodes of 8 cards (a tenth of the cards owned, a
 * twentieth of the nodes drained, as many offline), in a real PostgreSQL database. Timed: the
 * scrape as the route runs it (api/plane-metrics.ts: the grouped counts, the new job transitions,
 * the text; the jobs are counted whole at the first scrape and every 5 minutes, not in between), median and 95th percentile of `repeat` scrapes after a first one, with `busy` new
 * transitions written between two scrapes (what the counters then read).
 *
 *   node --import tsx bench/prometheus-scrape.ts [--jobs 100000 --nodes 1000 --repeat 21 --busy 100]
 */
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import { PlaneMetrics } from '../api/plane-metrics.ts';
import { openDatabase, type Db } from '../db/client.ts';
import { gpuCardCountsByNode, jobCountsByStateProject, nodeCountsByStatus, oldestQueuedByProject } from '../db/queries/plane-metrics.ts';
import { createDatabase, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';

const { values: o } = parseArgs({ options: { jobs: { type: 'string', default: '100000' }, nodes: { type: 'string', default: '1000' }, repeat: { type: 'string', default: '21' }, busy: { type: 'string', default: '100' } } });
const jobs = Number(o.jobs);
const nodeCount = Number(o.nodes);
const repeat = Number(o.repeat);
const busy = Number(o.busy);

/** Rows straight into the tables, set-wise: projects, jobs in every state with their history, nodes and cards. */
async function fill(db: Db): Promise<void> {
  await db.execute(sql`insert into projects (id, name) select 'prj-' || i, 'project-' || i from generate_series(1, 20) i`);
  await db.execute(sql`
    insert into jobs (id, type, state, project_id, gpus, selector, command, working_dir, env, params, queued_at)
    select 'job-' || i, 'CUSTOM',
      (array['SUCCEEDED','SUCCEEDED','SUCCEEDED','FAILED','CANCELLED','QUEUED','RUNNING','DISPATCHING','CREATED','LOST'])[1 + i % 10],
      'prj-' || (1 + i % 20), 1, '{}', '["true"]', '/tmp', '{}', '{}', now() - interval '1 hour'
    from generate_series(1, ${jobs}) i`);
  await db.execute(sql`
    insert into job_transitions (job_id, attempt, from_state, to_state, at)
    select 'job-' || i, 1, s.f, s.t, now() - s.ago * interval '1 minute'
    from generate_series(1, ${jobs}) i, (values (null, 'CREATED', 30), ('CREATED', 'QUEUED', 29), ('QUEUED', 'DISPATCHING', 20)) s(f, t, ago)`);
  await db.execute(sql`
    insert into nodes (id, hostname, labels, status, drained_at)
    select 'node-' || n, 'node-' || n, '{}', case when n % 20 = 1 then 'OFFLINE' else 'ONLINE' end, case when n % 20 = 2 then now() end
    from generate_series(1, ${nodeCount}) n`);
  await db.execute(sql`
    insert into gpu_slots (node_id, index, uuid, name, memory_mb, owner_job_id, owner_attempt)
    select 'node-' || n, c, 'GPU-' || n || '-' || c, 'fake', 81920,
      case when c = 0 and n * 10 <= ${jobs} then 'job-' || (n * 10 - 3) end, case when c = 0 and n * 10 <= ${jobs} then 1 end
    from generate_series(1, ${nodeCount}) n, generate_series(0, 7) c`);
  await db.execute(sql`analyze`);
}

const pg = await startThrowawayCluster(await freePort());
try {
  await createDatabase(pg.url('postgres'), 'scrape');
  const database = await openDatabase({ url: pg.url('scrape') });
  try {
    const t0 = performance.now();
    await fill(database.db);
    console.log(`filled ${jobs} jobs (${jobs * 3} history lines), ${nodeCount} nodes, ${nodeCount * 8} cards in ${Math.round(performance.now() - t0)} ms`);
    const metrics = new PlaneMetrics(database.db);
    const first = performance.now();
    const text = await metrics.text();
    console.log(`first scrape ${Math.round(performance.now() - first)} ms, ${text.length} bytes, ${text.split('\n').filter((l) => l && !l.startsWith('#')).length} samples`);
    const times: number[] = [];
    for (let i = 0; i < repeat; i++) {
      await database.db.execute(sql`insert into job_transitions (job_id, attempt, from_state, to_state) select 'job-' || (1 + (${i * busy} + k) % ${jobs}), 1, 'QUEUED', 'DISPATCHING' from generate_series(1, ${busy}) k`);
      const s = performance.now();
      await metrics.text();
      times.push(performance.now() - s);
    }
    times.sort((a, b) => a - b);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(1);
    console.log(`scrape over ${repeat} (after ${busy} new transitions each): p50 ${at(0.5)} ms, p95 ${at(0.95)} ms, max ${times[times.length - 1].toFixed(1)} ms`);
    // Each part alone, one after another: where a scrape's time goes.
    const parts: [string, () => Promise<unknown>][] = [
      ['jobs by state and project (the recount, every 5 min)', () => jobCountsByStateProject(database.db)],
      ['nodes by status', () => nodeCountsByStatus(database.db)],
      ['cards by node and state', () => gpuCardCountsByNode(database.db)],
      ['oldest queued job by project', () => oldestQueuedByProject(database.db)],
      ['the text (no database)', () => metrics.registry.metrics()],
    ];
    for (const [name, fn] of parts) {
      const ts: number[] = [];
      for (let i = 0; i < repeat; i++) {
        const s = performance.now();
        await fn();
        ts.push(performance.now() - s);
      }
      ts.sort((a, b) => a - b);
      console.log(`  ${name}: p50 ${ts[Math.floor(ts.length / 2)].toFixed(1)} ms`);
    }
  } finally {
    await database.close();
  }
} finally {
  pg.stop();
  pg.remove();
}
