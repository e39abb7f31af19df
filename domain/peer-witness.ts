/**
 * The peer-witness rules (issue 46): when the control plane may declare a silent node dead
 * at once instead of waiting for lost-after, what a node that lost the control plane does, and
 * which reports are refused once an attempt was declared dead. Pure: every input is what some
 * party heard and when, in the control plane's clock (milliseconds). Wired in by
 * workers/control/peer-verdicts.ts (the verdicts) and workers/gpu-host/peer-channel.ts (what the
 * witnesses hear); see docs/outage-rule.md, "Peer witnesses". nodeSideVerdict is not used by the
 * agent yet: it changes nothing about when a node fences, only the words.
 *
 * The control plane's verdict on node N at `now` (nodeVerdict):
 *   fine     the control plane heard N within deadAfter.
 *   outage   it did not, and it does not hear the rest of the cluster normally either (more than
 *            half of the other nodes within heardNormallyMs): the silence is the control plane's
 *            own, so nobody is declared dead (today's lost-after rule still applies).
 *   dead     it did not, the rest of the cluster is heard normally and has been for a stretch
 *            (clusterHeardSince), and at least max(2, a strict majority of N's assigned
 *            witnesses) fresh witness reports say the witness has not heard N for deadAfter
 *            within that stretch either. One witness, lying or not, never makes that count, and a
 *            node with fewer than 2 witnesses is never dead by this rule.
 *   suspect  any other silence: no new attempt goes to N, and today's lost-after rule decides
 *            (a one-way partition, where N's witnesses still hear it, stays here).
 * A witness report counts only while fresh (received within deadAfter: the witness itself is
 * being heard), only from one of N's assigned witnesses, and only its latest one.
 *
 * Why the stretch: when a network-wide outage ends, the nodes come back one by one, and in the
 * moment when most are heard again a straggler is still silent to everybody, its witnesses'
 * reports included. Counting silence only within the stretch makes the straggler's witnesses
 * hear it again first. Any network-wide outage longer than heardNormallyMs breaks the stretch,
 * and a shorter one silences nobody for longer than heardNormallyMs + one heartbeat interval,
 * so deadAfter must exceed that plus the interval between two evaluations (5 > 2.5 + 1 + 1 s).
 */
import type { LivenessPlan } from './liveness.ts';

export type Verdict = 'fine' | 'suspect' | 'dead' | 'outage';

export interface WitnessSettings {
  /** Silence after which a node counts as unheard, by the control plane or a witness (GPUPLANE_DEAD_AFTER_S). */
  deadAfterMs: number;
  /** Witnesses per node. */
  k: number;
  /** A node is heard normally when heard within this: two heartbeat intervals and some latency. */
  heardNormallyMs: number;
  /** The rest of the cluster is heard normally when more than this fraction of the other nodes is heard normally. */
  clusterHeardFraction: number;
}

export const DEFAULT_WITNESS_SETTINGS: WitnessSettings = { deadAfterMs: 5000, k: 3, heardNormallyMs: 2500, clusterHeardFraction: 0.5 };
/** Agents heartbeat to their witnesses, and witnesses report to the control plane, this often. */
export const WITNESS_REPORT_INTERVAL_MS = 1000;

/**
 * What witness `witness` last told the control plane about `subject`. The wire carries the
 * witness's silence as an age, which the control plane turns into its own clock
 * (lastHeardAt = receivedAt − age), so clocks need not agree. A witness that never heard its
 * subject reports the moment it began to watch it.
 */
export interface WitnessReport {
  witness: string;
  subject: string;
  lastHeardAt: number;
  receivedAt: number;
}

export interface ClusterView {
  now: number;
  /** Every member node, with when the control plane last heard it (null: never). */
  lastHeard: ReadonlyMap<string, number | null>;
  /** Each node's assigned witnesses (witness-assignment.ts). */
  witnesses: ReadonlyMap<string, readonly string[]>;
  reports: readonly WitnessReport[];
  /** Since when the control plane has heard the rest of the cluster normally, without a break (clusterHeardSince); null: it does not now. */
  heardSince: number | null;
}

export interface NodeVerdict {
  verdict: Verdict;
  /** One line for `gpuctl nodes` and job histories. */
  reason: string;
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** witnessesNeeded returns how many agreeing witnesses declare a node with `assigned` witnesses dead. */
export function witnessesNeeded(assigned: number): number {
  return Math.max(2, Math.floor(assigned / 2) + 1);
}

function silentFor(now: number, at: number | null | undefined): number {
  return at === null || at === undefined ? Infinity : now - at;
}

/** How many nodes the control plane heard normally (the basis of "the rest of the cluster is heard"). */
function heardCount(now: number, lastHeard: ClusterView['lastHeard'], s: WitnessSettings): number {
  let heard = 0;
  for (const at of lastHeard.values()) if (silentFor(now, at) < s.heardNormallyMs) heard++;
  return heard;
}

/** A stretch during which the control plane heard the rest of the cluster normally, as of its last evaluation. */
export interface HeardStretch {
  since: number;
  checkedAt: number;
}

/**
 * clusterHeardSince returns the stretch after an evaluation at `now`, given the one before
 * (null: none): none while no more than clusterHeardFraction of all nodes but one are heard
 * normally, a new one if the last evaluation is more than maxGapMs ago (a control plane that did
 * not look cannot vouch that it heard), else the same one. The control plane folds it over its
 * evaluations, at least every second, and passes `since` as ClusterView.heardSince.
 */
export function clusterHeardSince(prev: HeardStretch | null, now: number, lastHeard: ClusterView['lastHeard'], s: WitnessSettings = DEFAULT_WITNESS_SETTINGS, maxGapMs = WITNESS_REPORT_INTERVAL_MS): HeardStretch | null {
  const others = lastHeard.size - 1;
  if (!(others > 0 && heardCount(now, lastHeard, s) > others * s.clusterHeardFraction)) return null;
  if (!prev || now - prev.checkedAt > maxGapMs || now < prev.checkedAt) return { since: now, checkedAt: now };
  return { since: prev.since, checkedAt: now };
}

/** The latest fresh report of each assigned witness of `subject`: silent (has not heard it for deadAfter) or hearing. */
function witnessVotes(subject: string, view: ClusterView, s: WitnessSettings, since: number): { assigned: number; silent: number; hearing: number } {
  const assigned = [...new Set(view.witnesses.get(subject) ?? [])].filter((w) => w !== subject);
  const latest = new Map<string, WitnessReport>();
  for (const r of view.reports) {
    if (r.subject !== subject || !assigned.includes(r.witness)) continue;
    if (!(view.now - r.receivedAt < s.deadAfterMs && r.receivedAt <= view.now)) continue;
    const prev = latest.get(r.witness);
    if (!prev || r.receivedAt > prev.receivedAt) latest.set(r.witness, r);
  }
  let silent = 0;
  let hearing = 0;
  for (const r of latest.values()) {
    if (r.receivedAt - Math.max(r.lastHeardAt, since) >= s.deadAfterMs) silent++;
    else hearing++;
  }
  return { assigned: assigned.length, silent, hearing };
}

/** nodeVerdict returns the control plane's verdict on `subject` at view.now, by the rule in this file's header. */
export function nodeVerdict(subject: string, view: ClusterView, s: WitnessSettings = DEFAULT_WITNESS_SETTINGS): NodeVerdict {
  return verdictWith(subject, view, s, heardCount(view.now, view.lastHeard, s));
}

/** clusterVerdicts returns nodeVerdict for every member node, counting the heard nodes once. */
export function clusterVerdicts(view: ClusterView, s: WitnessSettings = DEFAULT_WITNESS_SETTINGS): Map<string, NodeVerdict> {
  const heard = heardCount(view.now, view.lastHeard, s);
  return new Map([...view.lastHeard.keys()].map((id) => [id, verdictWith(id, view, s, heard)]));
}

function verdictWith(subject: string, view: ClusterView, s: WitnessSettings, heardAll: number): NodeVerdict {
  const silence = silentFor(view.now, view.lastHeard.get(subject));
  if (silence < s.deadAfterMs) return { verdict: 'fine', reason: `heard ${secs(silence)} ago` };
  const quiet = silence === Infinity ? 'never heard' : `silent for ${secs(silence)}`;
  const others = Math.max(0, view.lastHeard.size - (view.lastHeard.has(subject) ? 1 : 0));
  const othersHeard = heardAll; // the subject is silent for deadAfter > heardNormallyMs, so every node heard is another
  if (!(others > 0 && othersHeard > others * s.clusterHeardFraction) || view.heardSince === null) {
    return { verdict: 'outage', reason: `${quiet}, but the control plane hears only ${othersHeard} of ${others} other nodes normally: its own outage, nobody is declared dead` };
  }
  const stretch = view.now - view.heardSince;
  if (stretch < s.deadAfterMs) {
    return { verdict: 'suspect', reason: `${quiet}, but the rest of the cluster is heard again for only ${secs(stretch)}: no verdict before ${secs(s.deadAfterMs)}` };
  }
  const v = witnessVotes(subject, view, s, view.heardSince);
  const need = witnessesNeeded(v.assigned);
  if (v.silent >= need) {
    return { verdict: 'dead', reason: `${quiet}; ${v.silent} of ${v.assigned} witnesses have not heard it for ${secs(s.deadAfterMs)} either, while ${othersHeard} of ${others} other nodes are heard` };
  }
  if (v.hearing > 0) {
    return { verdict: 'suspect', reason: `${quiet}, but ${v.hearing} of ${v.assigned} witnesses still hear it: a partial partition, no new attempts on it` };
  }
  if (v.assigned < 2) {
    return { verdict: 'suspect', reason: `${quiet}; ${v.assigned} witness is too few to declare it dead, so it is LOST after lost-after as without witnesses` };
  }
  return { verdict: 'suspect', reason: `${quiet}; ${v.silent} of ${v.assigned} witnesses confirm (${need} needed), so it is LOST after lost-after unless more do` };
}

/** What an agent knows about one of its peers (the nodes it witnesses and that witness it). */
export interface PeerContact {
  peer: string;
  /** When this node last heard the peer. */
  lastHeardAt: number;
  /** When the peer, by its last message, last heard the control plane (absent: it did not say). */
  peerLastHeardControlPlaneAt?: number;
}

export interface NodeSideView {
  now: number;
  /** The node's last contact with the control plane (today: the last successful probe of Temporal). */
  controlPlaneLastHeardAt: number;
  peers: readonly PeerContact[];
}

export interface NodeSideVerdict {
  /** fine and outage keep the attempts running; fence kills them (SIGTERM, SIGKILL after the fence grace). */
  verdict: 'fine' | 'outage' | 'fence';
  reason: string;
}

/**
 * nodeSideVerdict returns what a node does about its attempts at view.now: it fences exactly
 * when today's rule does (no contact with the control plane for fenceAfter), never earlier and
 * never later, whatever its peers say; the peers only say in the reason which case this is. An
 * earlier fence would let a control-plane outage kill jobs; a later one would outlive lost-after.
 * A node cut off alone may be declared dead long before it fences: its attempts' reports are
 * refused from then (acceptAttemptReport), which is what keeps a second attempt safe meanwhile.
 */
export function nodeSideVerdict(view: NodeSideView, plan: Pick<LivenessPlan, 'fenceAfterMs'>, s: WitnessSettings = DEFAULT_WITNESS_SETTINGS): NodeSideVerdict {
  const silence = view.now - view.controlPlaneLastHeardAt;
  const fenceAt = `fences at ${secs(plan.fenceAfterMs)}`;
  if (silence >= plan.fenceAfterMs) return { verdict: 'fence', reason: `no control plane for ${secs(silence)} (fence-after ${secs(plan.fenceAfterMs)}): killing its attempts, as without witnesses` };
  if (silence < s.deadAfterMs) return { verdict: 'fine', reason: `heard the control plane ${secs(silence)} ago` };
  const heard = view.peers.filter((p) => view.now - p.lastHeardAt < s.deadAfterMs);
  if (heard.length === 0) return { verdict: 'outage', reason: `hears neither the control plane (${secs(silence)}) nor any peer: keeps its attempts, ${fenceAt}` };
  const cpHeardByPeer = heard.filter((p) => p.peerLastHeardControlPlaneAt !== undefined && view.now - p.peerLastHeardControlPlaneAt < s.deadAfterMs);
  if (cpHeardByPeer.length > 0) {
    return { verdict: 'outage', reason: `cut off from the control plane alone (${cpHeardByPeer.length} of ${heard.length} peers hear it): may be declared dead and its reports refused; ${fenceAt}` };
  }
  return { verdict: 'outage', reason: `control-plane outage: ${heard.length} peers heard, none hears the control plane; keeps its attempts, ${fenceAt}` };
}

/** An attempt the control plane declared dead (its node was declared dead), and when. */
export interface DeadAttempt {
  jobId: string;
  attempt: number;
  nodeId: string;
  declaredAt: number;
}

export interface AttemptReport {
  jobId: string;
  attempt: number;
  nodeId: string;
  /** When the control plane received it. */
  receivedAt: number;
}

/**
 * acceptAttemptReport says whether a report (a heartbeat, an exit, a checkpoint, a metric batch)
 * of an attempt may be accepted: not once that attempt, or a later attempt of the same job, was
 * declared dead at or before its arrival. A report of a newer attempt than every declared one
 * is accepted. An attempt is fenced by its number, not its node: a gang's members on other
 * nodes are fenced with it.
 */
export function acceptAttemptReport(report: AttemptReport, dead: readonly DeadAttempt[]): { accept: boolean; reason: string } {
  const fence = dead.find((d) => d.jobId === report.jobId && d.attempt >= report.attempt && d.declaredAt <= report.receivedAt);
  if (!fence) return { accept: true, reason: 'attempt not declared dead' };
  return {
    accept: false,
    reason: `attempt ${report.attempt} of job ${report.jobId} from node ${report.nodeId} refused: attempt ${fence.attempt} was declared dead with node ${fence.nodeId}`,
  };
}
