/**
 * The peer witnesses' data (issue 46): the agents' peer reports, the control plane's verdicts on
 * the nodes, and the fencing of a dead node's attempts. Every time is the database's clock, so
 * the API replicas that receive reports and the control worker that judges them agree on it.
 */
import { sql } from 'drizzle-orm';
import type { Verdict } from '../../domain/peer-witness.ts';
import { epochMs, queryRows, textArray, type Executor } from '../client.ts';
import { planeIdentity } from '../schema.ts';
import { planeIdOf } from './plane.ts';
import { randomBytes } from 'node:crypto';

/** A node that takes part in the peer channel: ONLINE, and it has sent a peer report. */
export interface PeerMember {
  id: string;
  /** Where it takes heartbeats (host:port); null when its agent has no peer socket. */
  peerAddr: string | null;
  /** When its last report arrived, in ms of the database's clock. */
  reportedAtMs: number;
}

/** peerMembers returns the nodes that take part in the peer channel: ONLINE, with a peer report. */
export async function peerMembers(ex: Executor): Promise<PeerMember[]> {
  const rows = await queryRows<{ id: string; peer_addr: string | null; at: string }>(ex, sql`
    select id, peer_addr, ${epochMs(sql`reported_at`)} as at from nodes where status = 'ONLINE' and reported_at is not null order by id`);
  return rows.map((r) => ({ id: r.id, peerAddr: r.peer_addr, reportedAtMs: Number(r.at) }));
}

/** peerSecretOf returns the plane's peer secret, made (once, whoever asks first) when there is none. */
export async function peerSecretOf(ex: Executor): Promise<string> {
  await planeIdOf(ex);
  await ex.execute(sql`update plane_identity set peer_secret = ${randomBytes(32).toString('hex')} where peer_secret is null`);
  const [row] = await ex.select({ s: planeIdentity.peerSecret }).from(planeIdentity);
  return row.s!;
}

/** One subject a witness reports on: how long ago it last heard it (or, never heard, began to watch it). */
export interface HeardEntry {
  subject: string;
  agoMs: number;
}

/**
 * recordPeerReport records that node `nodeId`'s agent reported (the control plane heard it now),
 * where it takes heartbeats, whether its agent lives (`agentAlive`, null: the report did not say),
 * and what it heard of the `subjects` given (the caller keeps only those it witnesses). Returns
 * the database's now in ms.
 */
export async function recordPeerReport(ex: Executor, r: { nodeId: string; peerAddr: string | null; heard: readonly HeardEntry[]; ignored?: Record<string, number>; agentAlive?: boolean | null }): Promise<number> {
  const alive = r.agentAlive ?? null;
  // In the same statement as the report's other columns, so a report costs no more writes: the
  // time moves only when the value changes (the right-hand side reads the row as it was).
  const [now] = await queryRows<{ now: string }>(ex, sql`
    update nodes set reported_at = now(), peer_addr = ${r.peerAddr}, peer_ignored = ${r.ignored ? JSON.stringify(r.ignored) : null}::jsonb,
      agent_alive = ${alive}::boolean, agent_alive_at = case when agent_alive is distinct from ${alive}::boolean then now() else agent_alive_at end
    where id = ${r.nodeId} returning ${epochMs(sql`now()`)} as now`);
  if (r.heard.length) {
    const json = JSON.stringify(r.heard.map((h) => ({ s: h.subject, ago: h.agoMs })));
    await ex.execute(sql`
      insert into peer_reports (witness_id, subject_id, last_heard_at, received_at)
      select ${r.nodeId}, h.s, now() - make_interval(secs => h.ago / 1000.0), now() from jsonb_to_recordset(${json}::jsonb) as h(s text, ago bigint)
      on conflict (witness_id, subject_id) do update set last_heard_at = excluded.last_heard_at, received_at = excluded.received_at`);
  }
  return now ? Number(now.now) : Date.now();
}

/** What the control plane judges by: the database's now, the members, and every report (ms of the database's clock). */
export interface PeerView {
  now: number;
  members: PeerMember[];
  reports: { witness: string; subject: string; lastHeardAt: number; receivedAt: number }[];
}

/** peerView returns the members, their reports, and the database's now, for one pass of the verdict loop. */
export async function peerView(ex: Executor): Promise<PeerView> {
  const [now] = await queryRows<{ now: string }>(ex, sql`select ${epochMs(sql`now()`)} as now`);
  const members = await peerMembers(ex);
  const rows = await queryRows<{ w: string; s: string; h: string; r: string }>(ex, sql`
    select witness_id as w, subject_id as s, ${epochMs(sql`last_heard_at`)} as h, ${epochMs(sql`received_at`)} as r
    from peer_reports where received_at > now() - interval '1 minute'`);
  return { now: Number(now.now), members, reports: rows.map((x) => ({ witness: x.w, subject: x.s, lastHeardAt: Number(x.h), receivedAt: Number(x.r) })) };
}

/** setPeerVerdicts stores the verdicts that changed (verdict or reason), with when. */
export async function setPeerVerdicts(ex: Executor, changed: readonly { nodeId: string; verdict: Verdict; reason: string }[]): Promise<void> {
  if (!changed.length) return;
  const json = JSON.stringify(changed.map((c) => ({ id: c.nodeId, v: c.verdict, r: c.reason })));
  await ex.execute(sql`
    update nodes n set peer_verdict = c.v, peer_verdict_reason = c.r, peer_verdict_at = case when n.peer_verdict is distinct from c.v then now() else n.peer_verdict_at end
    from jsonb_to_recordset(${json}::jsonb) as c(id text, v text, r text) where n.id = c.id`);
}

/** A live attempt (DISPATCHING or RUNNING, the job's current one) with a member on a dead node. */
export interface FencedAttempt {
  jobId: string;
  attempt: number;
}

/**
 * fenceAttemptsOnNode marks every live attempt with a process on node `nodeId` (a gang's too)
 * fenced, keeping an earlier mark, and returns them all: from this commit on, nothing they send
 * is accepted (attemptFenced).
 */
export async function fenceAttemptsOnNode(ex: Executor, nodeId: string): Promise<FencedAttempt[]> {
  const rows = await queryRows<{ job_id: string; attempt: number }>(ex, sql`
    update job_attempts a set fenced_at = coalesce(a.fenced_at, now())
    from jobs j
    where j.id = a.job_id and j.attempt = a.attempt and j.state in ('DISPATCHING', 'RUNNING')
      and (a.node_id = ${nodeId} or exists (select 1 from jsonb_array_elements(coalesce(a.members, '[]'::jsonb)) m where m->>'node_id' = ${nodeId}))
    returning a.job_id, a.attempt`);
  return rows.map((r) => ({ jobId: r.job_id, attempt: Number(r.attempt) }));
}

/** attemptFenced says whether attempt `attempt` of job `jobId`, or a later one of it, was fenced (its node declared dead). */
export async function attemptFenced(ex: Executor, jobId: string, attempt: number): Promise<boolean> {
  const rows = await queryRows<{ one: number }>(ex, sql`select 1 as one from job_attempts where job_id = ${jobId} and attempt >= ${attempt} and fenced_at is not null limit 1`);
  return rows.length > 0;
}

/** One witness of a node, for `gpuctl nodes`: when it last heard the node, by its latest report. */
export interface WitnessHeard {
  subject: string;
  witness: string;
  lastHeardAt: Date;
  receivedAt: Date;
}

/** witnessReportsOf returns the latest report of every witness about each of `nodeIds`. */
export async function witnessReportsOf(ex: Executor, nodeIds: readonly string[]): Promise<WitnessHeard[]> {
  if (!nodeIds.length) return [];
  const rows = await queryRows<{ s: string; w: string; h: string; r: string }>(ex, sql`
    select subject_id as s, witness_id as w, last_heard_at as h, received_at as r from peer_reports
    where subject_id = any(${textArray(nodeIds)}::text[])`);
  return rows.map((x) => ({ subject: x.s, witness: x.w, lastHeardAt: new Date(x.h), receivedAt: new Date(x.r) }));
}
