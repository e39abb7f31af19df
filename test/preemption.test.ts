import { describe, expect, it } from 'vitest';
import { borrowers, planPreemptions, type Holder, type Waiter } from '../domain/preemption.ts';
import type { NodeRoom } from '../domain/placement.ts';

const t0 = Date.parse('2026-12-03T00:00:00Z');
const node = (id: string, total: number, free: number[] = [], labels: Record<string, string> = {}): NodeRoom => ({ id, labels, totalCards: total, free });
const holder = (jobId: string, projectId: string | null, nodeId: string, cards: number[], startedS: number, extra: Partial<Holder> = {}): Holder => ({
  jobId,
  attempt: 1,
  projectId,
  selector: {},
  priority: 0,
  gpus: cards.length,
  held: [{ nodeId, gpuIndices: cards }],
  startedAt: new Date(t0 + startedS * 1000),
  preemptible: true,
  preempting: false,
  ...extra,
});
const waiter = (id: string, projectId: string | null, gpus: number, extra: Partial<Waiter> = {}): Waiter => ({ id, projectId, gpus, selector: {}, priority: 0, withinQuota: false, ...extra });

describe('preemption rule (domain/preemption.ts)', () => {
  // b holds all 4 cards of n1 with a quota of 2: two of its jobs are borrowing, the two youngest.
  const quotas = [
    { projectId: 'a', pool: null, gpus: 2 },
    { projectId: 'b', pool: null, gpus: 2 },
  ];
  const bJobs = [holder('b1', 'b', 'n1', [0], 1), holder('b2', 'b', 'n1', [1], 2), holder('b3', 'b', 'n1', [2], 3), holder('b4', 'b', 'n1', [3], 4)];

  it('the cards beyond a quota, in keep order (priority, then start), are borrowed; a job of no quota only borrows', () => {
    expect([...borrowers(bJobs, quotas)].sort()).toEqual(['b3', 'b4']);
    expect([...borrowers([holder('x', 'x', 'n1', [0], 1)], quotas)]).toEqual(['x']);
    // A higher-priority job keeps its cards before an older one.
    const ranked = [holder('old', 'b', 'n1', [0], 1), holder('new', 'b', 'n1', [1], 2, { priority: 5 }), holder('mid', 'b', 'n1', [2], 3)];
    expect([...borrowers(ranked, quotas)]).toEqual(['mid']);
  });

  it('a project within its quota takes back borrowed cards: the fewest and youngest, once each', () => {
    const got = planPreemptions([waiter('a1', 'a', 1, { withinQuota: true }), waiter('a2', 'a', 1, { withinQuota: true })], [node('n1', 4)], bJobs, quotas, (p) => `P-${p}`);
    expect(got.map((p) => [p.jobId, p.forJobId])).toEqual([
      ['b4', 'a1'],
      ['b3', 'a2'],
    ]);
    expect(got[0].reason).toBe('preempted for job a1: project P-a is within its quota and takes back cards project P-b borrowed');
  });

  it('never below the victim project quota, never a job over quota, never --no-preempt', () => {
    // A third waiter of a finds nothing more borrowed.
    expect(planPreemptions([1, 2, 3].map((i) => waiter(`a${i}`, 'a', 1, { withinQuota: true })), [node('n1', 4)], bJobs, quotas)).toHaveLength(2);
    // Over its own quota, a takes nothing.
    expect(planPreemptions([waiter('a1', 'a', 1)], [node('n1', 4)], bJobs, quotas)).toEqual([]);
    // The borrowing jobs are not preemptible.
    const pinned = bJobs.map((h) => ({ ...h, preemptible: false }));
    expect(planPreemptions([waiter('a1', 'a', 1, { withinQuota: true })], [node('n1', 4)], pinned, quotas)).toEqual([]);
  });

  it('cards already coming free (a preemption in its grace) are used before anyone else is preempted', () => {
    const inGrace = bJobs.map((h) => (h.jobId === 'b4' ? { ...h, preempting: true } : h));
    const got = planPreemptions([waiter('a1', 'a', 1, { withinQuota: true }), waiter('a2', 'a', 1, { withinQuota: true })], [node('n1', 4)], inGrace, quotas);
    expect(got.map((p) => p.jobId)).toEqual(['b3']);
    // Free cards, likewise: nobody is preempted for a job that fits.
    expect(planPreemptions([waiter('a1', 'a', 1, { withinQuota: true })], [node('n1', 5, [4])], bJobs, quotas)).toEqual([]);
  });

  it("priority: a lower-priority job of the same project only; never another project's, borrowing or not", () => {
    const held = [holder('low', 'b', 'n1', [0, 1], 1), holder('lowB', 'b', 'n1', [2, 3], 2)];
    const q = [{ projectId: 'b', pool: null, gpus: 2 }];
    // b's high-priority job takes its own project's younger low one.
    const own = planPreemptions([waiter('hi', 'b', 2, { priority: 5 })], [node('n1', 4)], held, q);
    expect(own.map((p) => p.jobId)).toEqual(['lowB']);
    expect(own[0].reason).toContain('priority 5 over 0');
    // c (no quota) of higher priority takes nothing of b's, not even its borrowed cards: the
    // order across projects would hand them back to b, and c would preempt again each grace.
    expect(planPreemptions([waiter('c1', 'c', 4, { priority: 9 })], [node('n1', 4)], held, q)).toEqual([]);
    expect(planPreemptions([waiter('c1', 'c', 2, { priority: 9 })], [node('n1', 4)], held, q)).toEqual([]);
    // Jobs of no project are one project.
    const none = [holder('n0', null, 'n1', [0, 1, 2, 3], 1)];
    expect(planPreemptions([waiter('hiNone', null, 2, { priority: 1 })], [node('n1', 4)], none, []).map((p) => p.jobId)).toEqual(['n0']);
    // Equal priority and no quota: nobody.
    expect(planPreemptions([waiter('c1', 'c', 2)], [node('n1', 4)], held, q)).toEqual([]);
  });

  it('fewest victims first: one big job over two small ones; the node must match the selector and hold enough cards', () => {
    const held = [holder('s1', 'x', 'n1', [0], 1), holder('s2', 'x', 'n1', [1], 2), holder('big', 'x', 'n2', [0, 1], 1)];
    expect(planPreemptions([waiter('hi', 'x', 2, { priority: 1 })], [node('n1', 2), node('n2', 2)], held, []).map((p) => p.jobId)).toEqual(['big']);
    // Only n1 matches: both small ones go.
    const rooms = [node('n1', 2, [], { pool: 'p' }), node('n2', 2)];
    expect(planPreemptions([waiter('hi', 'x', 2, { priority: 1, selector: { pool: 'p' } })], rooms, held, []).map((p) => p.jobId).sort()).toEqual(['s1', 's2']);
    // No node has 3 cards: nothing to gain.
    expect(planPreemptions([waiter('hi', 'x', 3, { priority: 1 })], [node('n1', 2), node('n2', 2)], held, [])).toEqual([]);
  });

  it('a gang needs N nodes freed; a gang victim is preempted once, all of its cards coming free', () => {
    const gang: Holder = { ...holder('g', 'x', 'n1', [0, 1], 1), nodes: 2, held: [{ nodeId: 'n1', gpuIndices: [0, 1] }, { nodeId: 'n2', gpuIndices: [0, 1] }] };
    const got = planPreemptions([waiter('w', 'x', 2, { priority: 1, nodes: 2 })], [node('n1', 2), node('n2', 2)], [gang], []);
    expect(got.map((p) => p.jobId)).toEqual(['g']);
    // A single-node waiter after it finds the gang's other node coming free: no second victim.
    const two = planPreemptions([waiter('w1', 'x', 2, { priority: 1 }), waiter('w2', 'x', 2, { priority: 1 })], [node('n1', 2), node('n2', 2)], [gang], []);
    expect(two.map((p) => [p.jobId, p.forJobId])).toEqual([['g', 'w1']]);
  });
});
