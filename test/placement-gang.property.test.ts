/**
 * Properties of the planner over random clusters and queues that mix gangs (multi-node jobs)
 * with single-node jobs: what every plan respects, whatever the input; that it is the rule in
 * domain/placement.ts's header, written as a plain scan; and that queues without gangs are
 * planned exactly as before gangs existed (but for the starvation guard, whose rule changed since:
 * there, nobody is past the hold time).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { placementMembers, planPlacements, queueOrder, selectorMatches, type NodeRoom, type Placement, type QueuedJob } from '../domain/placement.ts';
import { planPlacementsBeforeGangs } from './support/placement-before-gangs.ts';

const t0 = Date.parse('2026-01-01T00:00:00Z');
const HOLD_MS = 60_000;
const zones = ['a', 'b'] as const;

const labelsArb = fc.oneof(fc.constant({}), fc.constantFrom(...zones).map((zone) => ({ zone })));

/** 1 to 12 nodes of 0 to 8 cards, some free, some labelled; ids unique, in no particular order. */
const clusterArb = fc
  .array(fc.record({ total: fc.integer({ min: 0, max: 8 }), freeMask: fc.integer({ min: 0, max: 255 }), labels: labelsArb }), { minLength: 1, maxLength: 12 })
  .chain((specs) => fc.shuffledSubarray(specs.map((s, i) => ({ ...s, id: `n${i}` })), { minLength: specs.length, maxLength: specs.length }))
  .map((list): NodeRoom[] => list.map((s) => ({ id: s.id, labels: s.labels, totalCards: s.total, free: [...Array(s.total).keys()].filter((i) => s.freeMask & (1 << i)) })));

/** A job: mostly 1-4 cards, sometimes none or more than a node has; `gangs` decides whether some span nodes. */
const jobArb = (gangs: boolean) =>
  fc.record({
    gpus: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 4 }) }, { weight: 1, arbitrary: fc.constantFrom(0, 5, 8, 9) }),
    nodes: gangs ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(undefined, 1) }, { weight: 2, arbitrary: fc.integer({ min: 2, max: 5 }) }) : fc.constantFrom(undefined, 1),
    selector: fc.oneof({ weight: 3, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: fc.constantFrom(...zones).map((zone) => ({ zone })) }),
    priority: fc.integer({ min: 0, max: 2 }),
    // Seconds before `now`: some jobs are past the hold time (60 s), most are not.
    age: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 59 }) }, { weight: 1, arbitrary: fc.integer({ min: 60, max: 90 }) }),
  });

const queueArb = (gangs: boolean) =>
  fc.array(jobArb(gangs), { maxLength: 30 }).map((specs): QueuedJob[] =>
    specs.map((j, i) => {
      const q: QueuedJob = { id: `j${String(i).padStart(2, '0')}`, attempt: 1 + (i % 2), gpus: j.gpus, selector: j.selector, priority: j.priority, queuedAt: new Date(t0 - j.age * 1000) };
      if (j.nodes !== undefined) q.nodes = j.nodes;
      return q;
    }),
  );

const now = new Date(t0);

/**
 * The rule as a plain scan, nothing kept between jobs but the free cards and the reservations:
 * in queue order, a job that enough matching nodes could ever take goes on the first N of the
 * matching nodes with room, ordered best fit first (fewest free, then lowest id; a zero-card
 * job: most free, then highest id); when fewer have room and it is past the hold time and the
 * first such job of its pool (the nodes its selector matches), it reserves the first N matching
 * nodes not yet reserved that have its cards in all, most free first, then lowest id, and holds
 * as many of each one's free cards as it needs there, lowest first: the rest stay free for the
 * jobs behind.
 */
function reference(queue: readonly QueuedJob[], nodes: readonly NodeRoom[]): Placement[] {
  const room = [...nodes].sort((a, b) => (a.id < b.id ? -1 : 1)).map((n) => ({ ...n, free: [...n.free], held: false }));
  const out: Placement[] = [];
  const poolsReserved = new Set<string>();
  for (const j of [...queue].sort(queueOrder)) {
    const size = j.nodes ?? 1;
    const matching = room.filter((n) => selectorMatches(j.selector, n.labels));
    const capable = matching.filter((n) => n.totalCards >= j.gpus);
    if (capable.length < size) continue;
    const idOrder = (a: (typeof room)[number], b: (typeof room)[number]) => (a.id < b.id ? -1 : 1);
    const fits = capable.filter((n) => n.free.length >= j.gpus).sort((a, b) => (j.gpus > 0 ? a.free.length - b.free.length || idOrder(a, b) : b.free.length - a.free.length || idOrder(b, a)));
    if (fits.length >= size) {
      const members = fits.slice(0, size).map((n) => ({ nodeId: n.id, gpuIndices: n.free.splice(0, j.gpus) }));
      out.push({ jobId: j.id, attempt: j.attempt, ...members[0], ...(size > 1 ? { members } : {}) });
      continue;
    }
    const pool = matching.map((n) => n.id).join(',');
    if (now.getTime() - j.queuedAt.getTime() < HOLD_MS || poolsReserved.has(pool)) continue;
    poolsReserved.add(pool);
    for (const n of capable.filter((c) => !c.held).sort((a, b) => b.free.length - a.free.length || idOrder(a, b)).slice(0, size)) {
      n.held = true;
      n.free.splice(0, j.gpus);
    }
  }
  return out;
}

/** Every invariant a plan keeps, whatever the rule's choices; throws on the first broken. */
function checkInvariants(queue: readonly QueuedJob[], nodes: readonly NodeRoom[], plan: readonly Placement[]) {
  const jobs = new Map(queue.map((j) => [j.id, j]));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const cardsGiven = new Set<string>();
  const perNode = new Map<string, number>();
  const placed = new Set<string>();
  for (const p of plan) {
    const j = jobs.get(p.jobId);
    expect(j, `${p.jobId} was queued`).toBeDefined();
    if (!j) continue;
    expect(placed.has(p.jobId), `${p.jobId} placed once`).toBe(false);
    placed.add(p.jobId);
    expect(p.attempt).toBe(j.attempt);
    const size = j.nodes ?? 1;
    const members = placementMembers(p);
    // Whole or not at all; `members` for a gang only, rank 0 also as nodeId/gpuIndices.
    expect(members.length, `${p.jobId}: members`).toBe(size);
    expect(p.members !== undefined).toBe(size > 1);
    expect({ nodeId: p.nodeId, gpuIndices: p.gpuIndices }).toEqual(members[0]);
    expect(new Set(members.map((m) => m.nodeId)).size, `${p.jobId}: distinct nodes`).toBe(size);
    for (const m of members) {
      const n = byId.get(m.nodeId);
      expect(n, `${p.jobId} on a known node`).toBeDefined();
      if (!n) continue;
      expect(selectorMatches(j.selector, n.labels), `${p.jobId} on ${n.id}: selector`).toBe(true);
      expect(m.gpuIndices.length).toBe(j.gpus);
      expect([...m.gpuIndices].sort((a, b) => a - b)).toEqual(m.gpuIndices);
      for (const g of m.gpuIndices) {
        expect(n.free.includes(g), `${p.jobId}: card ${n.id}:${g} was free`).toBe(true);
        expect(cardsGiven.has(`${n.id}:${g}`), `card ${n.id}:${g} given twice`).toBe(false);
        cardsGiven.add(`${n.id}:${g}`);
      }
      perNode.set(n.id, (perNode.get(n.id) ?? 0) + m.gpuIndices.length);
    }
  }
  for (const [id, used] of perNode) expect(used, `cards placed on ${id}`).toBeLessThanOrEqual(byId.get(id)!.free.length);
}

const strip = (plan: Placement[]) => JSON.parse(JSON.stringify(plan)) as Placement[];

describe('planPlacements with gangs: properties', () => {
  it('keeps every invariant and is the rule written as a plain scan, on queues mixing gangs and single-node jobs', () => {
    fc.assert(
      fc.property(clusterArb, queueArb(true), (nodes, queue) => {
        const given = JSON.stringify({ nodes, queue });
        const plan = planPlacements(queue, nodes, now, HOLD_MS);
        expect(JSON.stringify({ nodes, queue }), 'the inputs are not changed').toBe(given);
        checkInvariants(queue, nodes, plan);
        expect(strip(plan)).toEqual(reference(queue, nodes));
      }),
      { numRuns: 800 },
    );
  });

  it('gives the same plan whatever order the queue and the nodes come in', () => {
    fc.assert(
      fc.property(clusterArb, queueArb(true), fc.func(fc.integer()), (nodes, queue, key) => {
        const shuffle = <T>(xs: readonly T[]) => xs.map((x, i) => ({ x, k: key(i) })).sort((a, b) => a.k - b.k).map(({ x }) => x);
        expect(planPlacements(shuffle(queue), shuffle(nodes), now, HOLD_MS)).toEqual(planPlacements(queue, nodes, now, HOLD_MS));
      }),
      { numRuns: 300 },
    );
  });

  it('plans queues without gangs exactly as before gangs existed, `nodes` absent or 1 (nobody past the hold time: the guard has changed since)', () => {
    fc.assert(
      fc.property(clusterArb, queueArb(false), (nodes, queue) => {
        const noGuard = Number.POSITIVE_INFINITY;
        const plan = planPlacements(queue, nodes, now, noGuard);
        expect(JSON.stringify(plan)).toBe(JSON.stringify(planPlacementsBeforeGangs(queue, nodes, now, noGuard)));
        const allOnes = queue.map((j) => ({ ...j, nodes: 1 }));
        const noneSet = queue.map(({ nodes: _n, ...j }) => j);
        expect(JSON.stringify(planPlacements(allOnes, nodes, now, HOLD_MS))).toBe(JSON.stringify(planPlacements(queue, nodes, now, HOLD_MS)));
        expect(JSON.stringify(planPlacements(noneSet, nodes, now, HOLD_MS))).toBe(JSON.stringify(planPlacements(queue, nodes, now, HOLD_MS)));
      }),
      { numRuns: 800 },
    );
  });

  it('never lets a gang hold cards while it waits: the jobs behind a gang that is not placed are planned as if it were not queued (before the hold time)', () => {
    fc.assert(
      fc.property(clusterArb, queueArb(true), (nodes, queue) => {
        const young = queue.map((j) => ({ ...j, queuedAt: new Date(Math.max(j.queuedAt.getTime(), t0 - 59_000)) }));
        const plan = planPlacements(young, nodes, now, HOLD_MS);
        const placed = new Set(plan.map((p) => p.jobId));
        const without = young.filter((j) => placed.has(j.id) || (j.nodes ?? 1) <= 1);
        expect(planPlacements(without, nodes, now, HOLD_MS)).toEqual(plan);
      }),
      { numRuns: 300 },
    );
  });
});
