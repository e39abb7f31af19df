/**
 * One sample of who owns which card, straight from the catalogue, in one statement (one
 * snapshot). A live attempt (DISPATCHING or RUNNING) claims its cards: every member's for a gang,
 * its node's for a single-node job. bench/chaos and test/gang-mixed-load.e2e take these every
 * 250 ms while jobs come and go.
 */
export interface OwnershipSample {
  /** Cards claimed by more than one live attempt. */
  doubleOwned: number;
  /** Jobs with more than one live attempt. */
  twoLiveAttempts: number;
  /** Cards a live attempt claims whose gpu_slots row names another owner, or none. */
  ownerMismatch: number;
  /** Cards live attempts claim (a check that the claims were read at all). */
  claimed: number;
  /** Cards gpu_slots says are owned. */
  owned: number;
}

export const OWNERSHIP_SQL = `
  with live as (
    select job_id, attempt, node_id, gpu_indices, members from job_attempts where state in ('DISPATCHING', 'RUNNING')
  ), claims as (
    select l.job_id, l.attempt, m->>'node_id' as node_id, card::int as idx
    from live l,
      jsonb_array_elements(coalesce(l.members, jsonb_build_array(jsonb_build_object('node_id', l.node_id, 'gpu_indices', coalesce(l.gpu_indices, '[]'::jsonb))))) m,
      jsonb_array_elements_text(m->'gpu_indices') card
  )
  select
    (select count(*) from (select 1 from claims group by node_id, idx having count(*) > 1) d)::int as "doubleOwned",
    (select count(*) from (select 1 from live group by job_id having count(*) > 1) t)::int as "twoLiveAttempts",
    (select count(*) from claims c left join gpu_slots s on s.node_id = c.node_id and s.index = c.idx
      where s.owner_job_id is distinct from c.job_id or s.owner_attempt is distinct from c.attempt)::int as "ownerMismatch",
    (select count(*) from claims)::int as claimed,
    (select count(*) from gpu_slots where owner_job_id is not null)::int as owned`;

/** Takes one sample with `query` (a pg client's or pool's). */
export async function sampleOwnership(query: (text: string) => Promise<{ rows: unknown[] }>): Promise<OwnershipSample> {
  return (await query(OWNERSHIP_SQL)).rows[0] as OwnershipSample;
}
