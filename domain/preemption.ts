/**
 * Which running attempts a scheduling pass takes cards back from. Pure; the pass
 * (scheduler/pass.ts) runs it over the jobs it could not place, in the order it serves them.
 *
 * The rule (docs/architecture.md, "Preemption"):
 *  1. Borrowed cards. Taking each quota's running jobs in the order they keep their cards
 *     (priority, higher first, then start, older first), the cards beyond the quota are
 *     borrowed; a job of no quota (no project, or a project with none that applies) holds only
 *     borrowed cards. A waiting job within its project's quota may take back borrowed cards of
 *     another project's jobs.
 *  2. Priority. A waiting job may take the cards of a lower-priority job of its own project (jobs
 *     of no project count as one). Not another project's: the order across projects is quota,
 *     then usage, then priority, so the cards would go back to the victim's project first and
 *     the waiter would preempt again after each grace. A job within its project's quota is never
 *     preempted for another project's job.
 *  3. Only preemptible jobs (not `--no-preempt`), never one already being preempted, and only
 *     when preempting makes room: on a node the waiter's selector matches (N such nodes for a
 *     gang), the free cards, the cards of jobs already being preempted, and the victims' cards
 *     together cover what it needs. Cards already coming free are used first: a waiter they
 *     cover preempts nobody, so a pass during someone's grace period never preempts again.
 *  4. The fewest victims, then the youngest (latest started), then the lowest node id. A gang
 *     victim is preempted whole, and all its cards come free.
 *  5. A pass weighs the first PREEMPT_HEAD waiters that could be entitled (the rest wait for the
 *     next pass): a queue of 10,000 high-priority jobs costs a pass no more than 8 of them.
 */
import { cardsOf, quotaLookup, type ProjectQuota, type ShareJob } from './fair-share.ts';
import { selectorMatches, type NodeRoom } from './placement.ts';

/** How many waiters that could be entitled one pass weighs (rule 5). */
export const PREEMPT_HEAD = 8;

/** Seconds between a preempted attempt's SIGTERM and its SIGKILL, unless the job or GPUPLANE_PREEMPT_GRACE_S says otherwise. */
export const DEFAULT_PREEMPT_GRACE_S = 30;

/** A waiting job's queue reason while attempts are preempted for it (their jobs, the longest grace left). */
export function preemptingReason(victims: readonly string[], graceLeftS: number): string {
  const shown = victims.slice(0, 3).join(', ') + (victims.length > 3 ? `, … ${victims.length} in all` : '');
  return `taking cards back: preempting ${shown} (SIGKILL within ${graceLeftS} s)`;
}

/** A job that waits, as the pass served it (its serve order), with its class. */
export interface Waiter extends Omit<ShareJob, 'queuedAt'> {
  /** Within its project's quota (domain/fair-share.ts rule 2). */
  withinQuota: boolean;
}

/** An attempt that holds cards now. */
export interface Holder {
  jobId: string;
  attempt: number;
  projectId: string | null;
  selector: Record<string, string>;
  priority: number;
  /** Cards on each of its nodes. */
  gpus: number;
  nodes?: number;
  /** Its cards, by node. */
  held: { nodeId: string; gpuIndices: number[] }[];
  startedAt: Date;
  /** false: `--no-preempt`. */
  preemptible: boolean;
  /** Already asked to stop by a preemption: its cards are coming free. */
  preempting: boolean;
}

export interface Preemption {
  jobId: string;
  attempt: number;
  /** The waiting job it makes room for. */
  forJobId: string;
  /** Why, naming who takes the cards back. */
  reason: string;
}

const keyOf = (q: ProjectQuota) => `${q.projectId}\u0000${q.pool ?? ''}`;

/** The holders whose cards are (all) borrowed: beyond their quota in keep order, or of no quota (rule 1). */
export function borrowers(holders: readonly Holder[], quotas: readonly ProjectQuota[]): Set<string> {
  const out = new Set<string>();
  const used = new Map<string, number>();
  const quotaOf = quotaLookup(quotas);
  const keepOrder = holders.map((h) => ({ h, at: h.startedAt.getTime() })).sort((a, b) => b.h.priority - a.h.priority || a.at - b.at || (a.h.jobId < b.h.jobId ? -1 : 1));
  for (const { h } of keepOrder) {
    const q = quotaOf(h.projectId, h.selector);
    if (q === null) {
      out.add(h.jobId);
      continue;
    }
    const after = (used.get(keyOf(q)) ?? 0) + cardsOf(h);
    used.set(keyOf(q), after);
    if (after > q.gpus) out.add(h.jobId);
  }
  return out;
}

/** Why `w` may take `h`'s cards (rules 1 and 2): its quota, its priority, or null when it may not. */
function entitlement(w: Waiter, h: Holder, borrowed: Set<string>): 'quota' | 'priority' | null {
  if (!h.preemptible || h.preempting) return null;
  const sameProject = (w.projectId ?? null) === h.projectId;
  if (w.withinQuota && !sameProject && borrowed.has(h.jobId)) return 'quota';
  if (w.priority > h.priority && sameProject) return 'priority';
  return null;
}

/** The reason a victim's history and attempt carry. `name`: a project's name. */
function reasonOf(why: 'quota' | 'priority', w: Waiter, h: Holder, name: (p: string | null | undefined) => string): string {
  if (why === 'quota') return `preempted for job ${w.id}: project ${name(w.projectId)} is within its quota and takes back cards project ${name(h.projectId)} borrowed`;
  return `preempted for job ${w.id} of project ${name(w.projectId)}: priority ${w.priority} over ${h.priority}`;
}

type Entry = { h: Holder; here: number; at: number; why: 'quota' | 'priority' };
interface Option {
  node: string;
  victims: Entry[];
  /** The latest start among the victims (0: none). */
  youngest: number;
}
/** Rule 4: fewer victims, then younger, then the lower node id. */
const better = (a: Option, b: Option) => a.victims.length < b.victims.length || (a.victims.length === b.victims.length && (a.youngest > b.youngest || (a.youngest === b.youngest && a.node < b.node)));

/**
 * The attempts to preempt for `waiters` (in the order the pass serves them; the ones it could
 * not place), given the nodes' rooms after the pass's placements and the attempts holding cards.
 * `waiters` is taken only as far as rule 5 goes: it may be a lazy ranking (domain/fair-share.ts
 * fairShareRanked) of a long queue.
 */
export function planPreemptions(
  waiters: Iterable<Waiter>,
  rooms: readonly NodeRoom[],
  holders: readonly Holder[],
  quotas: readonly ProjectQuota[],
  projectName: (p: string | null | undefined) => string = (p) => p ?? '(none)',
): Preemption[] {
  if (!holders.some((h) => h.preemptible && !h.preempting)) return [];
  const borrowed = borrowers(holders, quotas);
  const lowest = holders.reduce((m, h) => Math.min(m, h.priority), Infinity);
  // Cards free now, and cards coming free (their holder is being preempted), by node.
  const free = new Map(rooms.map((r) => [r.id, r.free.length]));
  const soon = new Map<string, number>();
  const comeFree = (h: Holder) => {
    for (const m of h.held) soon.set(m.nodeId, (soon.get(m.nodeId) ?? 0) + m.gpuIndices.length);
  };
  for (const h of holders) if (h.preempting) comeFree(h);
  // Each node's holders with their cards there, sorted once: the most cards first (the fewest
  // victims), then the youngest; each waiter walks them in that order.
  const onNode = new Map<string, { h: Holder; here: number; at: number }[]>();
  for (const h of holders) for (const m of h.held) (onNode.get(m.nodeId) ?? onNode.set(m.nodeId, []).get(m.nodeId)!).push({ h, here: m.gpuIndices.length, at: h.startedAt.getTime() });
  for (const list of onNode.values()) list.sort((a, b) => b.here - a.here || b.at - a.at || (a.h.jobId < b.h.jobId ? -1 : 1));
  // The nodes a waiter's shape may use, worked out once per shape.
  const matching = new Map<string, NodeRoom[]>();
  const taken = new Set<string>();
  const out: Preemption[] = [];
  const avail = (n: string) => (free.get(n) ?? 0) + (soon.get(n) ?? 0);
  // Takes `gpus` of node n's free, then coming-free, cards for a waiter.
  const consume = (n: string, gpus: number) => {
    const f = Math.min(free.get(n) ?? 0, gpus);
    free.set(n, (free.get(n) ?? 0) - f);
    soon.set(n, (soon.get(n) ?? 0) - (gpus - f));
  };

  let weighed = 0;
  for (const w of waiters) {
    if (w.gpus === 0) continue;
    // Nobody to take cards from: neither within quota nor above anyone's priority.
    if (!w.withinQuota && w.priority <= lowest) continue;
    if (weighed++ >= PREEMPT_HEAD) break;
    const size = w.nodes ?? 1;
    const key = `${w.gpus}/${JSON.stringify(w.selector)}`;
    let nodes = matching.get(key);
    if (!nodes) matching.set(key, (nodes = rooms.filter((r) => r.totalCards >= w.gpus && selectorMatches(w.selector, r.labels))));
    if (nodes.length < size) continue;
    // Per node: the victims that make room there (none when cards coming free already do). The
    // best so far is kept as it is found (a gang keeps every node's): no list of every node.
    const options: Option[] = [];
    let best: Option | null = null;
    for (const n of nodes) {
      const have = avail(n.id);
      let need = w.gpus - have;
      let victims: Entry[] = [];
      if (need > 0) {
        const here = onNode.get(n.id);
        if (!here) continue;
        for (const c of here) {
          if (need <= 0) break;
          if (taken.has(c.h.jobId)) continue;
          const why = entitlement(w, c.h, borrowed);
          if (why === null) continue;
          victims.push({ h: c.h, here: c.here, at: c.at, why });
          need -= c.here;
        }
        if (need > 0) continue;
        // Drop any victim the others already cover (the greedy pick may overshoot), youngest kept last.
        for (let i = victims.length - 1; i >= 0 && victims.length > 1; i--) {
          const without = victims.reduce((sum, v, j) => sum + (j === i ? 0 : v.here), 0);
          if (w.gpus - have - without <= 0) victims = victims.filter((_, j) => j !== i);
        }
      }
      const o: Option = { node: n.id, victims, youngest: victims.reduce((m, v) => Math.max(m, v.at), 0) };
      if (size > 1) options.push(o);
      else if (best === null || better(o, best)) best = o;
    }
    if (size === 1 && best !== null) options.push(best);
    if (options.length < size) continue;
    if (size > 1) options.sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0));
    const chosen = options.slice(0, size);
    // A gang's nodes: a victim chosen for two of them is preempted once.
    for (const o of chosen) {
      for (const v of o.victims) {
        if (taken.has(v.h.jobId)) continue;
        taken.add(v.h.jobId);
        comeFree(v.h);
        out.push({ jobId: v.h.jobId, attempt: v.h.attempt, forJobId: w.id, reason: reasonOf(v.why, w, v.h, projectName) });
      }
    }
    for (const o of chosen) consume(o.node, w.gpus);
  }
  return out;
}
