/**
 * What the scheduler's passes read over and over, kept between them: the QUEUED jobs and the
 * RUNNING attempts that hold cards (the preemption step's), each as the pass last read it. A
 * pass reads only which rows are there now and their row versions (PostgreSQL's `xmin`, which
 * every insert or update of a row sets to the writing transaction's id, committed or the row is
 * not seen), in one row; it then reads in full only the rows it has not seen at that version.
 * So a job cancelled, re-queued, retried or re-prioritised since the last pass is read again,
 * and one that left the queue is gone from it. Parsing 10,000 queue rows and 7,200 attempts
 * every pass (and collecting them after) was a third of the pass's time in node.
 *
 * Still the pass's database writes are the last word, as without the cache: a job that leaves
 * the queue after the read is not moved, a card taken is not claimed (./dispatch.ts).
 */
import { sql, type SQL } from 'drizzle-orm';
import { queryRows, textArray, type Executor } from '../client.ts';
import type { QueuedJob } from '../../domain/placement.ts';
import type { Holder } from '../../domain/preemption.ts';
import { QUEUE_COLUMNS, queuedJobOf, type QueueRow } from './queued-jobs.ts';
import { HOLDER_COLUMNS, HOLDERS_FROM, holderOf, type HolderRow } from './preempt.ts';

/** Every this often the cache is dropped and its rows read in full again, whatever the versions say. */
const FULL_READ_EVERY_MS = 5 * 60_000;

/**
 * Rows of one kind, by `id version`: `keys` reads every row's key (one row: their list, joined by
 * ',', and how many there are); `rows(ids)` reads the rows of those ids (all of them: null) with
 * their `v`ersion. A row that `keep` refuses is read every time.
 */
class RowCache<R extends { id: string; v: string }, T> {
  private byKey = new Map<string, T>();
  private fullAt = -Infinity;

  constructor(
    private readonly keys: SQL,
    private readonly rows: (ids: string[] | null) => SQL,
  ) {}

  async read(ex: Executor, nowMs: number, of: (r: R) => T, keep: (r: R) => boolean): Promise<T[]> {
    const full = nowMs - this.fullAt;
    if (this.byKey.size === 0 || !(full >= 0 && full < FULL_READ_EVERY_MS)) return this.readAll(ex, nowMs, of, keep);
    const [k] = await queryRows<{ keys: string | null; n: number | string }>(ex, this.keys);
    const list = k.keys === null ? [] : k.keys.split(',');
    // An id with a ',' in it (none is made so): the list cannot be told apart, so read everything.
    if (list.length !== Number(k.n)) return this.readAll(ex, nowMs, of, keep);
    const next = new Map<string, T>();
    const out: T[] = [];
    const missing: string[] = [];
    for (const key of list) {
      const hit = this.byKey.get(key);
      if (hit === undefined) missing.push(key.slice(0, key.lastIndexOf(' ')));
      else {
        next.set(key, hit);
        out.push(hit);
      }
    }
    // Most rows changed: reading them all costs the database less than looking each up.
    if (missing.length > list.length / 2) return this.readAll(ex, nowMs, of, keep);
    if (missing.length > 0) for (const r of await queryRows<R>(ex, this.rows(missing))) this.add(next, out, r, of, keep);
    this.byKey = next;
    return out;
  }

  private async readAll(ex: Executor, nowMs: number, of: (r: R) => T, keep: (r: R) => boolean): Promise<T[]> {
    const next = new Map<string, T>();
    const out: T[] = [];
    for (const r of await queryRows<R>(ex, this.rows(null))) this.add(next, out, r, of, keep);
    this.byKey = next;
    this.fullAt = nowMs;
    return out;
  }

  private add(next: Map<string, T>, out: T[], r: R, of: (r: R) => T, keep: (r: R) => boolean): void {
    const t = of(r);
    out.push(t);
    if (keep(r)) next.set(`${r.id} ${r.v}`, t);
  }
}

const only = (ids: string[] | null) => (ids === null ? sql`` : sql` and j.id = any(${textArray(ids)}::text[])`);
/** `only` for the running attempts: each attempt looked up by its job too, not every attempt read to join them (half the read at 800 of 7,200). */
const onlyHeld = (ids: string[] | null) => (ids === null ? sql`` : sql`${only(ids)} and a.job_id = any(${textArray(ids)}::text[])`);

/**
 * PassCache keeps the queue and the running attempts between one process's scheduling passes
 * (runSchedulePass's `cache`): one per process that runs passes, as UsageCache is. Its reads
 * return what queuedJobs and preemptionHolders return.
 */
export class PassCache {
  /** Whether the last pass weighed preemptions (it read the running attempts): the next one then reads them from its start (scheduler/read.ts). */
  holdersWanted = true;
  private readonly queue = new RowCache<QueueRow & { v: string }, QueuedJob>(
    sql`select string_agg(j.id || ' ' || j.xmin::text, ',') as keys, count(*) as n from jobs j where j.state = 'QUEUED'`,
    (ids) => sql`select ${QUEUE_COLUMNS}, j.xmin::text as v from jobs j where j.state = 'QUEUED'${only(ids)}`,
  );
  private readonly holders = new RowCache<HolderRow & { v: string }, Holder>(
    sql`select string_agg(j.id || ' ' || j.xmin::text || '.' || a.xmin::text, ',') as keys, count(*) as n from ${HOLDERS_FROM}`,
    (ids) => sql`select ${HOLDER_COLUMNS}, j.xmin::text || '.' || a.xmin::text as v from ${HOLDERS_FROM}${onlyHeld(ids)}`,
  );

  /**
   * queuedJobs returns the QUEUED jobs, as ./queued-jobs.ts queuedJobs does. A retry's job (the node to avoid is its previous
   * attempt's, another row) and a job queued at no known time (it counts as queued `now`) are read every time.
   */
  queuedJobs(ex: Executor, now: Date): Promise<QueuedJob[]> {
    return this.queue.read(ex, now.getTime(), (r) => queuedJobOf(r, now), (r) => r.attempt <= 1 && r.queued_ms !== null);
  }

  /** preemptionHolders returns the RUNNING attempts that hold cards, as preempt.ts preemptionHolders does. */
  preemptionHolders(ex: Executor, now: Date): Promise<Holder[]> {
    return this.holders.read(ex, now.getTime(), holderOf, () => true);
  }
}
