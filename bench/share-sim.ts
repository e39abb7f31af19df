/**
 * bench/share-sim: utilisation and quota adherence of the scheduling rules over a simulated mixed
 * workload, the clock compressed (30 simulated minutes run in about a second). An in-memory
 * simulation of the pure rules (domain/placement.ts, domain/fair-share.ts, domain/preemption.ts)
 * combined as the pass combines them (scheduler/pass.ts runSchedulePass and scheduler/plan.ts), not
 * the real processes: no database, no workflows, no agents, no dispatch latency.
 *
 *   node --import tsx bench/share-sim.ts [--seed 1 --minutes 30 --grace 30 --half-life-h 1 --hold 300 --json]
 *
 *  - Cluster: 16 nodes × 8 cards, no labels. Quotas (whole cluster): a 64, b 40, c 24.
 *  - Workload (seeded, the same for both schedulers): each project submits single-node jobs of 1,
 *    2, 4 or 8 cards as a Poisson process whose rate changes over the run: a is quiet for the
 *    first third and then floods, b floods in the first half and then eases, c is steady; about
 *    1.3× what the cluster can run, so that there is always a queue and borrowing matters. Runs of
 *    1 to 15 minutes (log-uniform); one job in ten has priority 1.
 *  - One pass a simulated second: cards of finished jobs (and of preempted ones that have exited)
 *    come free, new jobs queue, then the pass places (the starvation guard's hold time `--hold`,
 *    300 s unless told) and, for GPUPlane, preempts. A preempted job saves a checkpoint on SIGTERM
 *    in 5 s and exits, so its cards come free after min(grace, 5 s) (killed at a grace under 5 s,
 *    it keeps only its last periodic checkpoint, every 2 minutes); it is queued again as its next
 *    attempt, with the work left plus 30 s to resume.
 *  - GPUPlane: fair-share order with quotas, usage decayed with a half-life of `--half-life-h`
 *    (1 h unless told, not the 24 h default, so that usage counts within half an hour), and
 *    preemption. Peer, in the same process: the plain order (priority, then submit time), no
 *    quotas, no preemption: what a FIFO/priority scheduler such as Slurm without preemption does.
 *    Both use the same planner, best fit, backfill and starvation guard.
 *
 * Figures: utilisation while anyone waits (busy cards / 128 over the seconds with a queue; a job in
 * its grace is busy); per project, over the seconds its demand (queued + held cards) reaches its
 * quota, the mean shortfall of its held cards below the quota as a share of the quota, and the worst
 * 60 s of it; how long attempts queued within their project's quota waited; preemptions and the
 * card-minutes they cost; jobs completed; mean queue wait, and the longest (a job still queued at
 * the end counts with its age then: what the starvation guard bounds). Two rows count preemptions
 * that help nobody: for a waiter within quota only because the pass ranks the unplaced jobs
 * against the cards held before its own placements (preemptFor's state is read before the plan),
 * and for a waiter whose earlier victims' cards have already come free and gone to jobs served
 * before it.
 */
import { parseArgs } from 'node:util';
import { decayedCardSeconds, fairShareRanking, type CardHolder, type FairShareState } from '../domain/fair-share.ts';
import { planPlacements, queueOrder, type NodeRoom, type QueuedJob } from '../domain/placement.ts';
import { planPreemptions, type Holder } from '../domain/preemption.ts';
import { printTable } from './share-sim-report.ts';
import { CARDS, CHECKPOINT_EVERY_S, mean, nodeIds, NODES, QUOTAS, RESUME_S, roomsAfter, SAVE_S, TOTAL, WINDOW_S, workload, type Attempt, type Figures, type ProjectFigure, type Rules, type Run, type Submission } from './share-sim-model.ts';

function fail(message: string): never {
  process.stderr.write(`bench/share-sim: ${message}\n`);
  process.exit(2);
}

function options() {
  try {
    return parseArgs({
      options: {
        seed: { type: 'string', default: '1' },
        minutes: { type: 'string', default: '30' },
        grace: { type: 'string', default: '30' },
        'half-life-h': { type: 'string', default: '1' },
        hold: { type: 'string', default: '300' },
        json: { type: 'boolean', default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
}
const args = options();
/** A flag's number: finite, ≥ 0, and > 0 where `positive`. */
function flag(name: 'seed' | 'minutes' | 'grace' | 'half-life-h' | 'hold', positive = false): number {
  const v = Number(args[name]);
  if (!Number.isFinite(v) || v < 0 || (positive && v === 0)) fail(`--${name} ${args[name]}: not a ${positive ? 'positive' : 'non-negative'} number`);
  return v;
}
const SEED = flag('seed');
const SECONDS = Math.round(flag('minutes', true) * 60);
const GRACE_S = flag('grace');
const HALF_LIFE_MS = flag('half-life-h', true) * 3_600_000;
const HOLD_MS = flag('hold') * 1000;

/** Runs the workload second by second under `rules`. */
function simulate(subs: readonly Submission[], rules: Rules): Figures {
  const free = new Map(nodeIds.map((id) => [id, new Set(Array.from({ length: CARDS }, (_, i) => i))]));
  let queue: Attempt[] = [];
  const running = new Map<string, Run>();
  const usage = new Map<string, number>();
  const timesPreempted = new Map<string, number>();
  const quotaOf = new Map(QUOTAS.map((q) => [q.projectId, q.gpus]));
  const series = new Map(QUOTAS.map((q) => [q.projectId, [] as (number | null)[]]));
  const withinWaits = new Map(QUOTAS.map((q) => [q.projectId, [] as number[]]));
  const waits: number[] = [];
  let longestWait = 0;
  let longestWaitGpus = 0;
  const waited = (a: Attempt, s: number) => {
    if (s > longestWait) [longestWait, longestWaitGpus] = [s, a.sub.gpus];
  };
  let next = 0;
  let busyWhileWaiting = 0;
  let waitingTicks = 0;
  let completed = 0;
  let preemptions = 0;
  let lostCardS = 0;
  let stale = 0;
  let again = 0;
  let idleReserved = 0;
  const preemptedFor = new Map<string, number>();

  const held = (p: string) => [...running.values()].reduce((s, r) => s + (r.a.sub.projectId === p ? r.a.sub.gpus : 0), 0);
  const queuedCards = (p: string) => queue.reduce((s, a) => s + (a.sub.projectId === p ? a.sub.gpus : 0), 0);
  const enqueue = (sub: Submission, attempt: number, t: number, remaining: number) => {
    const within = held(sub.projectId) + queuedCards(sub.projectId) + sub.gpus <= quotaOf.get(sub.projectId)!;
    queue.push({ sub, attempt, queuedAt: t, remaining, withinAtQueue: within });
  };
  const release = (r: Run) => {
    running.delete(r.a.sub.id);
    for (const i of r.gpuIndices) free.get(r.nodeId)!.add(i);
  };

  for (let t = 0; t < SECONDS; t++) {
    for (const r of [...running.values()]) {
      if (r.endsAt <= t && (r.preemptedAt === null || r.endsAt <= r.releaseAt)) {
        release(r);
        completed++;
      } else if (r.preemptedAt !== null && r.releaseAt <= t) {
        release(r);
        const ran = r.preemptedAt - r.startedAt;
        const kept = GRACE_S >= SAVE_S ? ran : Math.floor(ran / CHECKPOINT_EVERY_S) * CHECKPOINT_EVERY_S;
        lostCardS += r.a.sub.gpus * (ran - kept + (r.releaseAt - r.preemptedAt) + RESUME_S);
        enqueue(r.a.sub, r.a.attempt + 1, t, r.a.remaining - kept + RESUME_S);
      }
    }
    for (; next < subs.length && subs[next].at <= t; next++) enqueue(subs[next], 1, t, subs[next].work);

    if (queue.length > 0) {
      const now = new Date(t * 1000);
      const rooms: NodeRoom[] = nodeIds.map((id) => ({ id, labels: {}, totalCards: CARDS, free: [...free.get(id)!].sort((x, y) => x - y) }));
      const jobs: QueuedJob[] = queue.map((a) => ({ id: a.sub.id, projectId: a.sub.projectId, attempt: a.attempt, gpus: a.sub.gpus, selector: {}, priority: a.sub.priority, queuedAt: new Date(a.queuedAt * 1000) }));
      // Read before the plan, as the pass reads them (cardHolders, preemptionHolders).
      const cardHolders: CardHolder[] = [...running.values()].map((r) => ({ projectId: r.a.sub.projectId, selector: {}, cards: r.a.sub.gpus }));
      const holders: Holder[] = [...running.values()].map((r) => ({
        jobId: r.a.sub.id,
        attempt: r.a.attempt,
        projectId: r.a.sub.projectId,
        selector: {},
        priority: r.a.sub.priority,
        gpus: r.a.sub.gpus,
        held: [{ nodeId: r.nodeId, gpuIndices: r.gpuIndices }],
        startedAt: new Date(r.startedAt * 1000),
        preemptible: true,
        preempting: r.preemptedAt !== null,
      }));
      // shareFor: no fair-share state when one project queues.
      const share: FairShareState | undefined = rules === 'gpuplane' && new Set(queue.map((a) => a.sub.projectId)).size > 1 ? { quotas: QUOTAS, holders: cardHolders, usage: new Map(usage) } : undefined;
      const reservations = new Map<string, string>();
      const planned = planPlacements(jobs, rooms, now, HOLD_MS, reservations, share);
      const placed = new Set(planned.map((p) => p.jobId));
      const byId = new Map(queue.map((a) => [a.sub.id, a]));
      for (const p of planned) {
        const a = byId.get(p.jobId)!;
        for (const i of p.gpuIndices) free.get(p.nodeId)!.delete(i);
        running.set(a.sub.id, { a, nodeId: p.nodeId, gpuIndices: p.gpuIndices, startedAt: t, endsAt: t + a.remaining, preemptedAt: null, releaseAt: Infinity });
        waits.push(t - a.queuedAt);
        waited(a, t - a.queuedAt);
        if (a.withinAtQueue) withinWaits.get(a.sub.projectId)!.push(t - a.queuedAt);
      }
      queue = queue.filter((a) => !placed.has(a.sub.id));
      if (queue.length > 0) for (const n of reservations.keys()) idleReserved += free.get(n)!.size;

      if (rules === 'gpuplane') {
        // preemptFor: the jobs not placed, ranked with this pass's placements among the cards held.
        const waiting = jobs.filter((j) => !placed.has(j.id) && j.gpus > 0);
        const placedHolders = planned.map((p) => ({ projectId: byId.get(p.jobId)!.sub.projectId, selector: {}, cards: p.gpuIndices.length }));
        const state: FairShareState = { quotas: QUOTAS, holders: [...cardHolders, ...placedHolders], usage: share ? share.usage : new Map() };
        const ranked = fairShareRanking(waiting, state);
        const waiters = (share ? ranked : [...ranked].sort((x, y) => queueOrder(x.job, y.job))).map((r) => ({ ...r.job, withinQuota: r.withinQuota }));
        const picked = planPreemptions(waiters, roomsAfter(rooms, planned), holders, QUOTAS);
        if (picked.length > 0) {
          // The same ranking with this pass's placements counted among the cards held.
          const after = [...cardHolders, ...planned.map((p) => ({ projectId: byId.get(p.jobId)!.sub.projectId, selector: {}, cards: p.gpuIndices.length }))];
          const withinAfter = new Set(fairShareRanking(waiting, { ...state, holders: after }).filter((r) => r.withinQuota).map((r) => r.job.id));
          const withinBefore = new Set(ranked.filter((r) => r.withinQuota).map((r) => r.job.id));
          for (const v of picked) {
            const r = running.get(v.jobId)!;
            r.preemptedAt = t;
            r.releaseAt = t + Math.min(GRACE_S, SAVE_S);
            preemptions++;
            timesPreempted.set(v.jobId, (timesPreempted.get(v.jobId) ?? 0) + 1);
            const first = preemptedFor.get(v.forJobId);
            if (first === undefined) preemptedFor.set(v.forJobId, t);
            else if (t >= first + Math.min(GRACE_S, SAVE_S)) again++;
            // Rule 1's reason (a priority over a borrower's would be due whatever the quota says).
            if (v.reason.includes('within its quota') && withinBefore.has(v.forJobId) && !withinAfter.has(v.forJobId)) stale++;
          }
        }
      }
    }

    let busy = 0;
    const heldBy = new Map<string, number>();
    for (const r of running.values()) {
      busy += r.a.sub.gpus;
      heldBy.set(r.a.sub.projectId, (heldBy.get(r.a.sub.projectId) ?? 0) + r.a.sub.gpus);
    }
    if (queue.length > 0) {
      waitingTicks++;
      busyWhileWaiting += busy;
    }
    for (const q of QUOTAS) {
      const h = heldBy.get(q.projectId) ?? 0;
      series.get(q.projectId)!.push(h + queuedCards(q.projectId) >= q.gpus ? Math.max(0, q.gpus - h) / q.gpus : null);
      const u = (usage.get(q.projectId) ?? 0) * Math.pow(2, -1000 / HALF_LIFE_MS);
      usage.set(q.projectId, u + decayedCardSeconds(h, t * 1000, (t + 1) * 1000, (t + 1) * 1000, HALF_LIFE_MS));
    }
  }

  for (const a of queue) waited(a, SECONDS - a.queuedAt);
  let shortCards = 0;
  let quotaCards = 0;
  const projects = QUOTAS.map((q): ProjectFigure => {
    const s = series.get(q.projectId)!;
    const demand = s.filter((x): x is number => x !== null);
    shortCards += demand.reduce((sum, x) => sum + x * q.gpus, 0);
    quotaCards += demand.length * q.gpus;
    let worst: number | null = null;
    for (let i = 0; i + WINDOW_S <= s.length; i++) {
      const w = s.slice(i, i + WINDOW_S);
      if (w.every((x) => x !== null)) worst = Math.max(worst ?? 0, mean(w as number[])!);
    }
    const ww = withinWaits.get(q.projectId)!;
    return { project: q.projectId, quota: q.gpus, demandMinutes: demand.length / 60, meanShortfall: mean(demand) ?? 0, worstWindowShortfall: worst, withinQuotaWaitS: mean(ww), withinQuotaStarts: ww.length };
  });
  return {
    scheduler: rules,
    utilisationWhileWaiting: waitingTicks ? busyWhileWaiting / waitingTicks / TOTAL : 1,
    idleReserved: waitingTicks ? idleReserved / waitingTicks / TOTAL : 0,
    idleElsewhere: waitingTicks ? (waitingTicks * TOTAL - busyWhileWaiting - idleReserved) / waitingTicks / TOTAL : 0,
    waitingMinutes: waitingTicks / 60,
    shortfall: quotaCards ? shortCards / quotaCards : 0,
    projects,
    preemptions,
    preemptedAgain: [...timesPreempted.values()].filter((n) => n > 1).length,
    lostCardMinutes: lostCardS / 60,
    preemptionsForStaleQuota: stale,
    preemptionsForSameWaiter: again,
    completed,
    started: waits.length,
    meanWaitS: mean(waits) ?? 0,
    longestWaitS: longestWait,
    longestWaitGpus,
    stillQueued: queue.length,
  };
}

function main(): void {
  const subs = workload(SEED, SECONDS);
  const offered = subs.reduce((s, x) => s + x.gpus * x.work, 0) / (TOTAL * SECONDS);
  const t0 = performance.now();
  const [g, p] = (['gpuplane', 'peer'] as const).map((r) => simulate(subs, r));
  const ms = performance.now() - t0;
  const command = ['node --import tsx bench/share-sim.ts', ...process.argv.slice(2)].join(' ');
  const params = { seed: SEED, minutes: SECONDS / 60, graceS: GRACE_S, halfLifeH: HALF_LIFE_MS / 3_600_000, holdS: HOLD_MS / 1000, nodes: NODES, cardsPerNode: CARDS, quotas: Object.fromEntries(QUOTAS.map((q) => [q.projectId, q.gpus])), saveS: SAVE_S, checkpointEveryS: CHECKPOINT_EVERY_S, resumeS: RESUME_S, jobs: subs.length, offeredLoad: offered };
  if (args.json) {
    process.stdout.write(`${JSON.stringify({ command, params, wallMs: Math.round(ms), gpuplane: g, peer: p }, null, 2)}\n`);
    return;
  }
  const say = (s: string) => process.stdout.write(`${s}\n`);
  say(`$ ${command}`);
  say(`seed ${SEED}; ${SECONDS / 60} simulated minutes, 1 s passes, in ${(ms / 1000).toFixed(2)} s; ${NODES} nodes × ${CARDS} cards; quotas ${QUOTAS.map((q) => `${q.projectId} ${q.gpus}`).join(', ')}`);
  say(`grace ${GRACE_S} s (exit after ${Math.min(GRACE_S, SAVE_S)} s), checkpoints every ${CHECKPOINT_EVERY_S} s, resume ${RESUME_S} s, hold ${HOLD_MS / 1000} s, usage half-life ${HALF_LIFE_MS / 3_600_000} h`);
  say(`workload: ${subs.length} jobs (${QUOTAS.map((q) => `${q.projectId} ${subs.filter((s) => s.projectId === q.projectId).length}`).join(', ')}), offered load ${offered.toFixed(2)}× the cluster`);
  say('');
  printTable(g, p, say);
}

main();
