import { describe, expect, it } from 'vitest';
import { planPlacements, selectorMatches, type NodeRoom, type QueuedJob } from '../domain/placement.ts';

const t0 = new Date('2026-01-01T00:00:00Z');
const job = (id: string, gpus: number, extra: Partial<QueuedJob> = {}): QueuedJob => ({ id, attempt: 1, gpus, selector: {}, priority: 0, queuedAt: t0, ...extra });
const node = (id: string, free: number[], total = free.length, labels: Record<string, string> = {}): NodeRoom => ({ id, labels, totalCards: total, free });

describe('planPlacements', () => {
  it('puts all of a job\'s cards on one node, lowest indices first', () => {
    const p = planPlacements([job('j1', 3)], [node('a', [0, 1]), node('b', [1, 2, 5, 7], 8)], t0, 1000);
    expect(p).toEqual([{ jobId: 'j1', attempt: 1, nodeId: 'b', gpuIndices: [1, 2, 5] }]);
  });

  it('prefers the best fit so large holes stay open', () => {
    const p = planPlacements([job('j1', 1)], [node('big', [0, 1, 2, 3]), node('small', [0, 1], 4)], t0, 1000);
    expect(p[0].nodeId).toBe('small');
  });

  it('never hands out a card twice within a pass', () => {
    const p = planPlacements([job('a', 2), job('b', 2), job('c', 2)], [node('n', [0, 1, 2, 3])], t0, 1000);
    expect(p.map((x) => x.gpuIndices)).toEqual([[0, 1], [2, 3]]);
  });

  it('honours every selector label', () => {
    expect(selectorMatches({ zone: 'a', gpu: 'h100' }, { zone: 'a', gpu: 'h100', x: 'y' })).toBe(true);
    expect(selectorMatches({ zone: 'a', gpu: 'h100' }, { zone: 'a' })).toBe(false);
    const p = planPlacements([job('j', 1, { selector: { zone: 'b' } })], [node('a', [0], 1, { zone: 'a' }), node('b', [0], 1, { zone: 'b' })], t0, 1000);
    expect(p[0].nodeId).toBe('b');
  });

  it('backfills: a job that does not fit now does not block smaller jobs behind it', () => {
    const p = planPlacements([job('big', 4, { priority: 5 }), job('small', 1)], [node('n', [0, 1], 4)], t0, 60_000);
    expect(p.map((x) => x.jobId)).toEqual(['small']);
  });

  it('a job that can never fit blocks nobody, even after the hold time', () => {
    const late = new Date(t0.getTime() + 3_600_000);
    const p = planPlacements([job('huge', 16), job('small', 1)], [node('n', [0, 1], 4)], late, 60_000);
    expect(p.map((x) => x.jobId)).toEqual(['small']);
  });

  it('after the hold time a starving job reserves a node against backfill', () => {
    const late = new Date(t0.getTime() + 120_000);
    const queue = [job('big', 4), job('small', 1, { queuedAt: late })];
    const p = planPlacements(queue, [node('n', [0, 1], 4), node('m', [0], 1)], late, 60_000);
    // 'n' is held for 'big'; 'small' can still use the other node.
    expect(p).toEqual([{ jobId: 'small', attempt: 1, nodeId: 'm', gpuIndices: [0] }]);
  });

  it('orders the queue itself: priority (higher first), then queue time (older first), then id', () => {
    const later = new Date(t0.getTime() + 1000);
    const ordered = [
      job('hi', 1, { priority: 9, queuedAt: later }),
      job('mid-old', 1, { priority: 5 }),
      job('mid-a', 1, { priority: 5, queuedAt: later }),
      job('mid-b', 1, { priority: 5, queuedAt: later }),
      job('lo', 1, { priority: -1 }),
    ];
    // Five one-card jobs for four cards: whatever order the queue comes in, the lowest one waits.
    const want = [
      { jobId: 'hi', gpuIndices: [0] },
      { jobId: 'mid-old', gpuIndices: [1] },
      { jobId: 'mid-a', gpuIndices: [2] },
      { jobId: 'mid-b', gpuIndices: [3] },
    ];
    const shuffled = [ordered[3], ordered[4], ordered[1], ordered[0], ordered[2]];
    for (const queue of [ordered, [...ordered].reverse(), shuffled]) {
      const given = [...queue];
      const p = planPlacements(queue, [node('n', [0, 1, 2, 3])], t0, 60_000);
      expect(p.map(({ jobId, gpuIndices }) => ({ jobId, gpuIndices }))).toEqual(want);
      expect(queue).toEqual(given); // the caller's array is not reordered
    }
  });

  it('places as a plain best-fit scan would, on random clusters and queues (the bucketed fast path included)', () => {
    // The rule in its simplest form: each job in queue order takes the matching node with the
    // fewest free cards that suffice (ties: lowest id), its lowest free indices.
    const reference = (queue: QueuedJob[], nodes: NodeRoom[]) => {
      const room = nodes.map((n) => ({ ...n, free: [...n.free] }));
      const out: { jobId: string; nodeId: string; gpuIndices: number[] }[] = [];
      for (const j of [...queue].sort((a, b) => b.priority - a.priority || a.queuedAt.getTime() - b.queuedAt.getTime() || (a.id < b.id ? -1 : 1))) {
        const fits = room.filter((n) => n.free.length >= j.gpus && selectorMatches(j.selector, n.labels)).sort((a, b) => a.free.length - b.free.length || (a.id < b.id ? -1 : 1));
        if (j.gpus > 0 && fits.length) out.push({ jobId: j.id, nodeId: fits[0].id, gpuIndices: fits[0].free.splice(0, j.gpus) });
      }
      return out;
    };
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 200; round++) {
      const nodes = Array.from({ length: 1 + rand(30) }, (_, i) => {
        const free = [...Array(8).keys()].filter(() => rand(3) === 0);
        return node(`n${String(i).padStart(3, '0')}`, free, 8, rand(4) === 0 ? { zone: 'b' } : {});
      });
      const queue = Array.from({ length: rand(60) }, (_, i) => job(`j${String(i).padStart(3, '0')}`, 1 + rand(4), { priority: rand(3), selector: rand(5) === 0 ? { zone: 'b' } : {}, queuedAt: new Date(t0.getTime() + rand(1000)) }));
      const got = planPlacements(queue, nodes, t0, 3_600_000).map(({ jobId, nodeId, gpuIndices }) => ({ jobId, nodeId, gpuIndices }));
      expect(got, `round ${round}`).toEqual(reference(queue, nodes));
    }
  });
});

