/**
 * What the console's live updates poll (api/routes/console.ts): change counters, one per topic,
 * and the runs and jobs touched in a range of metric-chunk and event ids.
 *
 * The counters are sequences bumped by triggers (migrations 0004_console_changes,
 * 0023_statement_change_triggers and 0028_sweeps_changes: once per statement on the tables a scheduling pass writes in
 * bulk): reading them costs the same at 10 rows as at 10 million, and bumping one takes no lock a
 * writer could wait on. A counter says only that its topic changed, not how many rows did. Sequences are not transactional, so a counter moves before (or without) its commit: the
 * watcher names what changed again a little later, when the writer has committed.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Db } from '../client.ts';

export const CHANGE_TOPICS = ['jobs', 'nodes', 'runs', 'metrics', 'events', 'checkpoints', 'sweeps'] as const;
export type ChangeTopic = (typeof CHANGE_TOPICS)[number];

/** More changed ids than this and a change names none (`truncated`): clients refetch everything they show. */
export const MAX_IDS = 200;

/** Each topic's counter, and the last ids handed out for metric chunks and events (committed or not). */
export type Versions = Record<ChangeTopic, string> & { metricId: number; eventId: number };

/** A sequence's last value, 0 before its first nextval (a fresh sequence reports its start value). */
const seq = (name: string) => sql.raw(`(select case when is_called then last_value else 0 end from ${name})`);

/** readVersions reads all counters in one query of sequence reads: O(1), whatever the size of the tables. */
export async function readVersions(db: Db): Promise<Versions> {
  const [r] = await queryRows<Record<string, string | number>>(
    db,
    sql`select ${sql.join(
      CHANGE_TOPICS.map((t) => sql`${seq(`gpuplane_change_${t}`)} as ${sql.raw(t)}`),
      sql`, `,
    )}, ${seq('metric_chunks_id_seq')} as metric_id, ${seq('events_id_seq')} as event_id`,
  );
  const v = Object.fromEntries(CHANGE_TOPICS.map((t) => [t, String(r[t])])) as Record<ChangeTopic, string>;
  return { ...v, metricId: Number(r.metric_id), eventId: Number(r.event_id) };
}

/** An id range (after, upTo] of metric chunks and of events. */
export interface IdWindow {
  metricAfter: number;
  metricUpTo: number;
  eventAfter: number;
  eventUpTo: number;
}

export interface ChangedIds {
  runIds: string[];
  jobIds: string[];
  /** More than MAX_IDS runs or jobs changed: the lists are empty and every page should refetch. */
  truncated: boolean;
}

/**
 * changedIds returns the runs with metric chunks, and the runs and jobs with events, in `w`. Both ranges are on
 * primary keys, so the cost follows what changed, not the size of the tables. Rows of the range
 * not yet committed are not seen: the watcher asks again for the same range later.
 */
export async function changedIds(db: Db, w: IdWindow): Promise<ChangedIds> {
  const runIds = new Set<string>();
  const jobIds = new Set<string>();
  let more = false;
  if (w.metricUpTo > w.metricAfter) {
    const r = await queryRows<{ run_id: string }>(db, sql`select distinct run_id from metric_chunks where id > ${w.metricAfter} and id <= ${w.metricUpTo} limit ${MAX_IDS + 1}`);
    r.forEach((x) => runIds.add(x.run_id));
    more ||= r.length > MAX_IDS;
  }
  if (w.eventUpTo > w.eventAfter) {
    const r = await queryRows<{ run_id: string | null; job_id: string | null }>(
      db,
      sql`select distinct run_id, job_id from events where id > ${w.eventAfter} and id <= ${w.eventUpTo} limit ${MAX_IDS + 1}`,
    );
    for (const x of r) {
      if (x.run_id) runIds.add(x.run_id);
      if (x.job_id) jobIds.add(x.job_id);
    }
    more ||= r.length > MAX_IDS;
  }
  if (more || runIds.size > MAX_IDS || jobIds.size > MAX_IDS) return { runIds: [], jobIds: [], truncated: true };
  return { runIds: [...runIds], jobIds: [...jobIds], truncated: false };
}
