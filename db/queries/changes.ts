/**
 * What the console's live updates poll (api/routes/console.ts): one row that changes whenever
 * something a page shows changes, and the runs and jobs touched between two such rows.
 */
import { sql } from 'drizzle-orm';
import type { Db } from '../client.ts';

export const CHANGE_TOPICS = ['jobs', 'nodes', 'runs', 'metrics', 'events', 'checkpoints'] as const;
export type ChangeTopic = (typeof CHANGE_TOPICS)[number];

/** More changed ids than this and a change names none: clients refetch everything they show. */
const MAX_IDS = 200;

export type Versions = Record<ChangeTopic, string> & { metricId: number; eventId: number };

async function rows<T>(db: Db, q: ReturnType<typeof sql>): Promise<T[]> {
  return ((await db.execute(q)) as unknown as { rows: T[] }).rows;
}

/**
 * One row that changes whenever something a page shows changes. Every part is an aggregate over
 * a small table or a max over a primary key, so a poll costs well under a millisecond.
 */
export async function readVersions(db: Db): Promise<Versions> {
  const [r] = await rows<Record<string, string | number | null>>(
    db,
    sql`select
      (select coalesce(max(updated_at)::text, '') || '/' || count(*) from jobs)
        || '/' || (select coalesce(max(id), 0) from job_transitions) as jobs,
      (select md5(coalesce(string_agg(id || status || labels::text, ',' order by id), '')) from nodes)
        || (select md5(coalesce(string_agg(node_id || ':' || index || ':' || coalesce(owner_job_id, '') || present, ',' order by node_id, index), '')) from gpu_slots) as nodes,
      (select count(*) || '/' || count(ended_at) || '/' || coalesce(max(created_at)::text, '') from runs) as runs,
      (select coalesce(max(id), 0) from metric_chunks) as metric_id,
      (select coalesce(max(id), 0) from events) as event_id,
      (select count(*) || '/' || count(deleted_at) from checkpoints)
        || (select md5(coalesce(string_agg(id || status, ',' order by id), '')) from evaluations) as checkpoints`,
  );
  const metricId = Number(r.metric_id);
  const eventId = Number(r.event_id);
  return { jobs: String(r.jobs), nodes: String(r.nodes), runs: String(r.runs), checkpoints: String(r.checkpoints), metrics: String(metricId), events: String(eventId), metricId, eventId };
}

/** Ids touched since the last poll, or [] when there are too many to name. */
export async function changedIds(db: Db, v: Versions, prev: Versions): Promise<{ runIds: string[]; jobIds: string[] }> {
  const runIds = new Set<string>();
  const jobIds = new Set<string>();
  if (v.metricId > prev.metricId) {
    const r = await rows<{ run_id: string }>(db, sql`select distinct run_id from metric_chunks where id > ${prev.metricId} and id <= ${v.metricId} limit ${MAX_IDS + 1}`);
    r.forEach((x) => runIds.add(x.run_id));
  }
  if (v.eventId > prev.eventId) {
    const r = await rows<{ run_id: string | null; job_id: string | null }>(
      db,
      sql`select distinct run_id, job_id from events where id > ${prev.eventId} and id <= ${v.eventId} limit ${MAX_IDS + 1}`,
    );
    for (const x of r) {
      if (x.run_id) runIds.add(x.run_id);
      if (x.job_id) jobIds.add(x.job_id);
    }
  }
  const cap = (s: Set<string>) => (s.size > MAX_IDS ? [] : [...s]);
  return { runIds: cap(runIds), jobIds: cap(jobIds) };
}

