import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planPlacements, type NodeRoom, type QueuedJob } from '../domain/placement.ts';
import { DEFAULT_QUARANTINE, quarantineReason } from '../domain/quarantine.ts';
import { drainedReason, freeCardsReason, planReasons } from '../domain/queue-reasons.ts';

const t0 = new Date('2026-01-01T00:00:00Z');
const HOLD = 60_000;
const job = (id: string, gpus: number, extra: Partial<QueuedJob> = {}): QueuedJob => ({ id, attempt: 1, gpus, selector: {}, priority: 0, queuedAt: t0, ...extra });
const node = (id: string, free: number[], total = free.length, labels: Record<string, string> = {}): NodeRoom => ({ id, labels, totalCards: total, free });

/** The reason an API answer gives: the rooms' words, else the plan's. */
function reasonOf(j: QueuedJob, queue: QueuedJob[], rooms: NodeRoom[], now = t0): string {
  return freeCardsReason(j, rooms) ?? planReasons([j], queue, rooms, now, HOLD).get(j.id)!;
}

describe('queue reasons', () => {
  it('a job no ONLINE node matches says so, also with no node at all', () => {
    const j = job('j', 1, { selector: { pool: 'x' } });
    expect(freeCardsReason(j, [node('a', [0], 1, { pool: 'y' })])).toBe('no ONLINE node matching pool=x');
    expect(freeCardsReason(j, [])).toBe('no ONLINE node matching pool=x');
    expect(freeCardsReason(job('k', 1), [])).toBe('no ONLINE node');
  });

  it('a job that fits only drained nodes waits for them, named with their reasons; one that could run elsewhere is not told so', () => {
    const d = (id: string, free: number[], labels: Record<string, string> = {}, why: string | null = 'disk swap') => ({ ...node(id, free, free.length, labels), drainReason: why });
    const j = job('j', 2, { selector: { name: 'd2' } });
    expect(drainedReason(j, [node('a', [0, 1], 2, { name: 'a' })], [d('d2', [0, 1], { name: 'd2' })])).toBe('waiting for drained node d2 (disk swap): gpuctl node resume d2');
    expect(drainedReason(j, [], [d('d2', [0, 1], { name: 'd2' }, null)])).toBe('waiting for drained node d2: gpuctl node resume d2');
    // Too big for the drained node as well: never fits, whatever the drain.
    expect(drainedReason(job('k', 4, { selector: { name: 'd2' } }), [], [d('d2', [0, 1], { name: 'd2' })])).toBeNull();
    // It fits an undrained node (busy now): it waits for cards, not for the drain.
    expect(drainedReason(job('m', 1), [node('a', [], 2)], [d('d2', [0, 1])])).toBeNull();
    // A gang that needs the drained nodes too.
    const g = job('g', 1, { nodes: 3 });
    expect(drainedReason(g, [node('a', [0], 1)], [d('d1', [0]), d('d2', [0], {}, 'quarantined: …')])).toBe('waiting for drained nodes d1 (disk swap), d2 (quarantined: …): gpuctl node resume d1');
  });

  it("a job that waits for the last node, quarantined, names gpuctl node resume where it is read: the quarantine's reason without the attempts it names", () => {
    const why = quarantineReason([3, 2, 1].map((n) => ({ jobId: `job-${n}`, attempt: 1, cause: 'lost' as const, at: new Date(n) })), DEFAULT_QUARANTINE)!;
    const vm = { ...node('vm', [0, 1, 2], 3), drainReason: why };
    expect(drainedReason(job('j', 1), [], [vm])).toBe('waiting for drained node vm (quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h): gpuctl node resume vm');
  });

  it('keeps neverFitsReason\'s words for a job too big for every node, single or gang', () => {
    expect(freeCardsReason(job('j', 9), [node('a', [0], 8)])).toBe('no ONLINE node has 9 cards (largest: 8)');
    expect(freeCardsReason(job('g', 4, { nodes: 3 }), [node('a', [], 4), node('b', [], 4)])).toBe('no 3 ONLINE nodes have 4 cards each (2 do; largest: 4)');
  });

  it('waiting for cards: the free cards on the best matching node and the cards needed', () => {
    const rooms = [node('a', [0], 4, { pool: 'x' }), node('b', [0, 1, 2], 4, { pool: 'x' }), node('c', [0, 1, 2, 3], 4, { pool: 'y' })];
    expect(freeCardsReason(job('j', 4, { selector: { pool: 'x' } }), rooms)).toBe('waiting for cards: 3 free on the best matching node, 4 needed');
    // A node too small ever to take it is not its best node.
    expect(freeCardsReason(job('k', 4), [node('small', [0, 1], 2), node('big', [0], 8)])).toBe('waiting for cards: 1 free on the best matching node, 4 needed');
  });

  it('waiting for cards, for a gang: how many of the nodes it needs have its cards free', () => {
    const rooms = [node('a', [0, 1], 4), node('b', [0], 4), node('c', [], 4)];
    expect(freeCardsReason(job('g', 2, { nodes: 3 }), rooms)).toBe('waiting for cards: 1 of 3 nodes have 2 free cards');
    expect(freeCardsReason(job('g', 1, { nodes: 2 }), rooms)).toBeNull();
  });

  it('behind higher-priority or older jobs: it would fit, but the jobs ahead take the cards', () => {
    const rooms = [node('a', [0, 1], 4)];
    const queue = [job('first', 2, { priority: 1 }), job('second', 2)];
    expect(freeCardsReason(queue[1], rooms)).toBeNull();
    expect(planReasons([queue[1]], queue, rooms, t0, HOLD).get('second')).toBe('behind higher-priority or older jobs');
  });

  it('waiting for the next scheduling pass: the plan would place it now', () => {
    const rooms = [node('a', [0, 1], 4)];
    expect(reasonOf(job('j', 2), [job('j', 2)], rooms)).toBe('waiting for the next scheduling pass');
  });

  it('held: a starved job reserves the node with the most free cards, and a job that would fit there is held', () => {
    const now = new Date(t0.getTime() + 2 * HOLD);
    // starved waited past the hold and needs 4; node a has 3 free: it reserves a (most free).
    const starved = job('starved', 4, { queuedAt: t0, priority: 1 });
    const small = job('small', 2, { queuedAt: new Date(now.getTime() - 1000) });
    const rooms = [node('a', [0, 1, 2], 4), node('b', [0], 4)];
    expect(reasonOf(starved, [starved, small], rooms, now)).toBe('waiting for cards: 3 free on the best matching node, 4 needed');
    expect(reasonOf(small, [starved, small], rooms, now)).toBe('held: behind job starved, which reserves node a (waited past GPUPLANE_BACKFILL_HOLD_S)');
    // Before the hold time nothing is reserved: the small job would go now.
    expect(reasonOf(small, [starved, small], rooms, t0)).toBe('waiting for the next scheduling pass');
  });

  it('held for a gang: a starved gang reserves its nodes', () => {
    const now = new Date(t0.getTime() + 2 * HOLD);
    const gang = job('gang', 4, { nodes: 2, queuedAt: t0, priority: 1 });
    const small = job('small', 1, { queuedAt: now });
    const rooms = [node('a', [0, 1], 4), node('b', [0], 4)];
    expect(reasonOf(gang, [gang, small], rooms, now)).toBe('waiting for cards: 0 of 2 nodes have 4 free cards');
    expect(reasonOf(small, [gang, small], rooms, now)).toBe('held: behind job gang, which reserves nodes a,b (waited past GPUPLANE_BACKFILL_HOLD_S)');
  });

  it('held for a gang only as far as the cards it needs: a job that fits on the rest of a reserved node goes', () => {
    const now = new Date(t0.getTime() + 2 * HOLD);
    // The gang wants 2 × 2: a has 4 free, b 1; it reserves both and holds 2 of a's, leaving the other 2.
    const gang = job('gang', 2, { nodes: 2, queuedAt: t0 });
    const two = job('two', 2, { queuedAt: now });
    const three = job('three', 3, { queuedAt: now });
    const rooms = [node('a', [0, 1, 2, 3]), node('b', [0], 4)];
    expect(reasonOf(two, [gang, two], rooms, now)).toBe('waiting for the next scheduling pass');
    expect(reasonOf(three, [gang, three], rooms, now)).toBe('held: behind job gang, which reserves node a (waited past GPUPLANE_BACKFILL_HOLD_S)');
  });

  it('gives every unplaced job a reason, and "waiting for the next scheduling pass" only to the jobs a plan places', () => {
    const arb = fc.record({
      nodes: fc.array(fc.record({ total: fc.integer({ min: 0, max: 4 }), used: fc.integer({ min: 0, max: 4 }), pool: fc.constantFrom('x', 'y') }), { maxLength: 4 }),
      jobs: fc.array(fc.record({ gpus: fc.integer({ min: 0, max: 5 }), nodes: fc.integer({ min: 1, max: 3 }), pool: fc.constantFrom('x', 'y', 'z', ''), priority: fc.integer({ min: 0, max: 2 }), age: fc.integer({ min: 0, max: 3 * HOLD }) }), { minLength: 1, maxLength: 8 }),
    });
    fc.assert(
      fc.property(arb, ({ nodes, jobs }) => {
        const now = new Date(t0.getTime() + 3 * HOLD);
        const rooms = nodes.map((n, i) => node(`n${i}`, [...Array(n.total).keys()].slice(Math.min(n.used, n.total)), n.total, { pool: n.pool }));
        const queue = jobs.map((j, i) => job(`j${i}`, j.gpus, { nodes: j.nodes, selector: j.pool ? { pool: j.pool } : {}, priority: j.priority, queuedAt: new Date(now.getTime() - j.age) }));
        const placed = new Set(planPlacements(queue, rooms, now, HOLD).map((p) => p.jobId));
        for (const j of queue) {
          const free = freeCardsReason(j, rooms);
          // A job the rooms' words say cannot go now is never placed by a plan.
          if (free !== null) expect(placed.has(j.id)).toBe(false);
          const r = reasonOf(j, queue, rooms, now);
          expect(r.length).toBeGreaterThan(0);
          expect(r === 'waiting for the next scheduling pass').toBe(placed.has(j.id));
        }
      }),
      { numRuns: 300 },
    );
  });
});
