import { describe, expect, it } from 'vitest';
import { neverFitsReason, placementMembers, planPlacements, selectorMatches, type NodeRoom, type Placement, type QueuedJob } from '../domain/placement.ts';

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

  it('a retried job avoids the node its last attempt failed on while another has room, and goes there when none does', () => {
    const rooms = () => [node('big', [0, 1, 2, 3]), node('small', [0, 1], 4)];
    expect(planPlacements([job('j1', 1, { avoid: 'small' })], rooms(), t0, 1000)[0].nodeId).toBe('big');
    // With a selector, and a zero-card job, the same.
    const labelled = [node('a', [0, 1], 2, { pool: 'p' }), node('b', [0, 1, 2], 3, { pool: 'p' })];
    expect(planPlacements([job('j2', 1, { avoid: 'a', selector: { pool: 'p' } })], labelled, t0, 1000)[0].nodeId).toBe('b');
    expect(planPlacements([job('j3', 0, { avoid: 'b' })], labelled, t0, 1000)[0].nodeId).toBe('a');
    // Only the avoided node has room: it takes it rather than wait.
    expect(planPlacements([job('j4', 3, { avoid: 'big' })], rooms(), t0, 1000)[0].nodeId).toBe('big');
    // The jobs behind it still get the best fit.
    const p = planPlacements([job('j5', 1, { avoid: 'small' }), job('j6', 1)], rooms(), t0, 1000);
    expect(p.map((x) => x.nodeId)).toEqual(['big', 'small']);
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


describe('planPlacements: gangs (nodes > 1)', () => {
  const gang = (id: string, nodes: number, gpus: number, extra: Partial<QueuedJob> = {}) => job(id, gpus, { nodes, ...extra });
  const members = (p: Placement[]) => p.map((x) => ({ jobId: x.jobId, members: placementMembers(x).map((m) => `${m.nodeId}:${m.gpuIndices.join(',')}`) }));
  const late = new Date(t0.getTime() + 120_000);

  it('a retried gang avoids the node its last attempt failed on while enough others have room, and takes it when they are too few', () => {
    const nodes = () => [node('a', [0, 1]), node('b', [0, 1, 2]), node('c', [0, 1, 2, 3]), node('d', [0], 2, { zone: 'z' })];
    // Best fits are a then b; with a avoided, b and c.
    expect(members(planPlacements([gang('g', 2, 2)], nodes(), t0, 1000))[0].members).toEqual(['a:0,1', 'b:0,1']);
    expect(members(planPlacements([gang('g', 2, 2, { avoid: 'a' })], nodes(), t0, 1000))[0].members).toEqual(['b:0,1', 'c:0,1']);
    // Three nodes needed, three with room: the avoided one too.
    expect(members(planPlacements([gang('g', 3, 2, { avoid: 'a' })], nodes(), t0, 1000))[0].members.map((m) => m[0]).sort()).toEqual(['a', 'b', 'c']);
    // With a selector, likewise.
    const zoned = () => [node('x', [0], 2, { zone: 'z' }), node('y', [0, 1], 2, { zone: 'z' }), node('w', [0, 1], 2, { zone: 'z' })];
    expect(members(planPlacements([gang('g', 2, 1, { selector: { zone: 'z' }, avoid: 'x' })], zoned(), t0, 1000))[0].members).toEqual(['w:0', 'y:0']);
    expect(members(planPlacements([gang('g', 3, 1, { selector: { zone: 'z' }, avoid: 'x' })], zoned(), t0, 1000))[0].members).toEqual(['w:0', 'y:0', 'x:0']);
    // The avoided node passed over is still there for the jobs behind the gang.
    expect(members(planPlacements([gang('g', 2, 2, { avoid: 'a' }), job('s', 2)], nodes(), t0, 1000))).toEqual([
      { jobId: 'g', members: ['b:0,1', 'c:0,1'] },
      { jobId: 's', members: ['a:0,1'] },
    ]);
  });

  it('gives every member its node and cards, in rank order: the best fits first, lowest indices first; rank 0 is nodeId and gpuIndices', () => {
    const nodes = [node('a', [0, 1, 2, 3]), node('b', [4, 5, 6], 8), node('c', [1, 3], 8), node('d', [0, 1, 2], 8), node('e', [7])];
    const p = planPlacements([gang('g', 3, 2)], nodes, t0, 1000);
    expect(p).toEqual([
      {
        jobId: 'g',
        attempt: 1,
        nodeId: 'c',
        gpuIndices: [1, 3],
        members: [
          { nodeId: 'c', gpuIndices: [1, 3] },
          { nodeId: 'b', gpuIndices: [4, 5] },
          { nodeId: 'd', gpuIndices: [0, 1] },
        ],
      },
    ]);
  });

  it('leaves a single-node job\'s placement as it was: no members (placementMembers gives its one node)', () => {
    for (const nodes of [undefined, 1]) {
      const [p] = planPlacements([job('j', 1, { nodes })], [node('a', [0, 1])], t0, 1000);
      expect(Object.keys(p)).toEqual(['jobId', 'attempt', 'nodeId', 'gpuIndices']);
      expect(placementMembers(p)).toEqual([{ nodeId: 'a', gpuIndices: [0] }]);
    }
  });

  it('places a gang whole or not at all: short one node, it holds nothing and the jobs behind it get the cards', () => {
    const p = planPlacements([gang('g', 3, 2, { priority: 9 }), job('s1', 2), job('s2', 2)], [node('a', [0, 1]), node('b', [0, 1]), node('c', [0], 2)], t0, 60_000);
    expect(members(p)).toEqual([
      { jobId: 's1', members: ['a:0,1'] },
      { jobId: 's2', members: ['b:0,1'] },
    ]);
  });

  it('two gangs that each need both of two nodes do not deadlock: the first in order gets both, the other waits', () => {
    const nodes = [node('a', [0, 1]), node('b', [0, 1])];
    for (const queue of [[gang('g1', 2, 2), gang('g2', 2, 2)], [gang('g2', 2, 2), gang('g1', 2, 2)]]) {
      expect(members(planPlacements(queue, nodes, t0, 60_000))).toEqual([{ jobId: 'g1', members: ['a:0,1', 'b:0,1'] }]);
    }
    const fav = [gang('g1', 2, 2), gang('g2', 2, 2, { priority: 1 })];
    expect(members(planPlacements(fav, nodes, t0, 60_000))).toEqual([{ jobId: 'g2', members: ['a:0,1', 'b:0,1'] }]);
  });

  it('puts every member on a distinct node that matches the selector, however many cards one node has', () => {
    const nodes = [node('a', [0, 1, 2, 3, 4, 5, 6, 7], 8, { zone: 'x' }), node('b', [0, 1], 8, { zone: 'y' }), node('c', [0, 1], 8, { zone: 'x' })];
    expect(members(planPlacements([gang('g', 2, 2, { selector: { zone: 'x' } })], nodes, t0, 1000))).toEqual([{ jobId: 'g', members: ['c:0,1', 'a:0,1'] }]);
    // Two matching nodes for three members: not placed, though 'a' alone has the cards of all three.
    expect(planPlacements([gang('g', 3, 2, { selector: { zone: 'x' } })], nodes, t0, 1000)).toEqual([]);
  });

  it('places a zero-card gang on N distinct matching nodes (the most free first, as a zero-card job), and not on fewer', () => {
    const nodes = [node('a', [], 2), node('b', [0], 2), node('c', [], 2, { zone: 'z' })];
    expect(members(planPlacements([gang('g', 2, 0)], nodes, t0, 1000))).toEqual([{ jobId: 'g', members: ['b:', 'c:'] }]);
    expect(members(planPlacements([gang('g', 3, 0)], nodes, t0, 1000))).toEqual([{ jobId: 'g', members: ['b:', 'c:', 'a:'] }]);
    expect(planPlacements([gang('g', 4, 0)], nodes, t0, 1000)).toEqual([]);
    expect(planPlacements([gang('g', 2, 0, { selector: { zone: 'z' } })], nodes, t0, 1000)).toEqual([]);
  });

  it('a gang that can never fit blocks nobody and reserves nothing, even after the hold time', () => {
    // Two nodes with 4 cards and one with 2: a gang of 3 × 4 can never run here.
    const nodes = [node('a', [0, 1], 4), node('b', [0, 1, 2, 3]), node('c', [0, 1])];
    const p = planPlacements([gang('huge', 3, 4, { priority: 9 }), job('s', 2, { queuedAt: late })], nodes, new Date(t0.getTime() + 3_600_000), 60_000);
    expect(members(p)).toEqual([{ jobId: 's', members: ['a:0,1'] }]);
  });

  it('after the hold time a starving gang reserves N matching nodes, the most free first (ties: lowest id); nothing behind it goes there', () => {
    const nodes = [node('a', [0], 2), node('b', [0, 1]), node('c', [0], 2), node('d', [0], 2), node('e', [0], 2, { zone: 'other' })];
    const queue = [gang('g', 3, 2, { selector: {} }), job('s1', 1, { queuedAt: late }), job('s2', 1, { queuedAt: late }), job('s3', 1, { queuedAt: late })];
    // Only 'b' has 2 free: 'g' reserves b, then a and c (1 free each, lowest ids); the small jobs get d and e.
    expect(members(planPlacements(queue, nodes, late, 60_000))).toEqual([
      { jobId: 's1', members: ['d:0'] },
      { jobId: 's2', members: ['e:0'] },
    ]);
    // Before the hold time they backfill on the best fits, a first.
    expect(members(planPlacements(queue, nodes, t0, 60_000)).map((x) => x.members[0])).toEqual(['a:0', 'c:0', 'd:0']);
  });

  it('a starving gang with a selector reserves only matching nodes, as many as are left open when fewer are', () => {
    const nodes = [node('a', [0], 2, { zone: 'x' }), node('b', [0], 2, { zone: 'x' }), node('c', [0], 2), node('d', [0], 2, { zone: 'x' })];
    const queue = [job('first', 2), gang('g', 3, 2, { selector: { zone: 'x' } }), job('s1', 1, { queuedAt: late }), job('s2', 1, { queuedAt: late })];
    // 'first' (any node: another pool) reserves a (most free, lowest id); 'g' gets the two matching nodes left, b and d; 'c' is all that is left to place on.
    const reservations = new Map<string, string>();
    expect(members(planPlacements(queue, nodes, late, 60_000, reservations))).toEqual([{ jobId: 's1', members: ['c:0'] }]);
    expect(Object.fromEntries(reservations)).toEqual({ a: 'first', b: 'g', d: 'g' });
  });

  it('one starved job reserves per pool: the first in order; those behind it in the same pool reserve nothing until it runs', () => {
    const nodes = [node('a', [0], 2, { zone: 'x' }), node('b', [0], 2, { zone: 'x' }), node('c', [0], 2), node('d', [0], 2)];
    // All past the hold time, in this order (queued a millisecond apart).
    const old = (id: string, i: number, extra: Partial<QueuedJob> = {}) => job(id, 2, { queuedAt: new Date(t0.getTime() + i), ...extra });
    const queue = [
      old('x1', 0, { selector: { zone: 'x' } }),
      old('x2', 1, { selector: { zone: 'x' }, nodes: 2 }),
      old('any1', 2),
      old('any2', 3, { nodes: 2 }),
      old('x3', 4, { selector: { zone: 'x' } }),
      job('s1', 1, { queuedAt: late }),
      job('s2', 1, { queuedAt: late }),
    ];
    const reservations = new Map<string, string>();
    // x1 reserves a (zone x); any1 the first open node of all, b; x2, any2 and x3 wait their turn; s1 and s2 take c and d.
    expect(members(planPlacements(queue, nodes, late, 60_000, reservations))).toEqual([
      { jobId: 's1', members: ['c:0'] },
      { jobId: 's2', members: ['d:0'] },
    ]);
    expect(Object.fromEntries(reservations)).toEqual({ a: 'x1', b: 'any1' });
    // Two selectors that match the same nodes are one pool.
    const same = [node('a', [0], 2, { zone: 'x', gpu: 'h' }), node('b', [0], 2, { zone: 'x', gpu: 'h' }), node('c', [0], 2)];
    const q2 = [old('x', 0, { selector: { zone: 'x' } }), old('h', 1, { selector: { gpu: 'h' } }), job('s', 1, { queuedAt: late, selector: { zone: 'x' } })];
    const r2 = new Map<string, string>();
    expect(members(planPlacements(q2, same, late, 60_000, r2))).toEqual([{ jobId: 's', members: ['b:0'] }]);
    expect(Object.fromEntries(r2)).toEqual({ a: 'x' });
    // A starved job that is placed does not take its pool's turn: the next one reserves.
    const q3 = [job('fits', 1), old('next', 1), job('s', 1, { queuedAt: late })];
    const r3 = new Map<string, string>();
    expect(members(planPlacements(q3, [node('a', [0], 2), node('b', [0], 2)], late, 60_000, r3))).toEqual([{ jobId: 'fits', members: ['a:0'] }]);
    expect(Object.fromEntries(r3)).toEqual({ b: 'next' });
  });

  it('a reservation holds only the reserver\'s cards: a starving gang\'s node with more free than it needs stays open for the rest', () => {
    // g wants 3 × 2; a and b have 2 free or more, c 1, d none: g reserves a, b (2 held each) and c (1 held).
    const nodes = [node('a', [0, 1, 2, 3, 4], 8), node('b', [0, 1], 8), node('c', [7], 8), node('d', [], 8)];
    const queue = [gang('g', 3, 2), job('a0', 0, { queuedAt: late }), job('s3', 3, { queuedAt: late })];
    const reservations = new Map<string, string>();
    expect(members(planPlacements(queue, nodes, late, 60_000, reservations))).toEqual([
      // A zero-card job takes the node with the most free cards, those held not counted: a, reserved or not.
      { jobId: 'a0', members: ['a:'] },
      // a's cards beyond the two held for g.
      { jobId: 's3', members: ['a:2,3,4'] },
    ]);
    expect(Object.fromEntries(reservations)).toEqual({ a: 'g', b: 'g', c: 'g' });
  });

  it('is not starved forever by single-node jobs that keep taking one node\'s cards', () => {
    // Two nodes of 2 cards, a gang wanting both. Every pass a one-card job arrives behind it and
    // runs two passes: best fit stacks them on one node, so both nodes are never empty at once
    // unless the gang holds them.
    const run = (holdMs: number) => {
      const running: { id: string; until: number; node: string; idx: number }[] = [{ id: 'pre', until: 2, node: 'a', idx: 0 }];
      const queue: QueuedJob[] = [gang('g', 2, 2)];
      for (let pass = 0; pass < 60; pass++) {
        running.splice(0, running.length, ...running.filter((r) => r.until > pass));
        queue.push(job(`s${pass}`, 1, { queuedAt: new Date(t0.getTime() + 1 + pass * 1000) }));
        const nodes = ['a', 'b'].map((n) => node(n, [0, 1].filter((i) => !running.some((r) => r.node === n && r.idx === i)), 2));
        for (const p of planPlacements(queue, nodes, new Date(t0.getTime() + pass * 1000), holdMs)) {
          if (p.jobId === 'g') return pass;
          queue.splice(queue.findIndex((j) => j.id === p.jobId), 1);
          running.push({ id: p.jobId, until: pass + 2, node: p.nodeId, idx: p.gpuIndices[0] });
        }
      }
      return null;
    };
    expect(run(Number.POSITIVE_INFINITY)).toBeNull();
    // Past the hold time, from pass 10, it holds both nodes; the last job placed there (pass 9) ends at 11.
    expect(run(10_000)).toBe(11);
  });
});

describe('neverFitsReason', () => {
  const nodes = [node('a', [], 8), node('b', [], 8, { zone: 'x' }), node('c', [], 4, { zone: 'x' })];

  it('keeps its single-node wording', () => {
    expect(neverFitsReason(9, {}, nodes)).toBe('no ONLINE node has 9 cards (largest: 8)');
    expect(neverFitsReason(1, { zone: 'y' }, nodes)).toBe('no ONLINE node matching zone=y');
    expect(neverFitsReason(8, {}, nodes, 1)).toBeNull();
    expect(neverFitsReason(8, {}, [])).toBeNull();
  });

  it('says when fewer than N ONLINE nodes could take a gang', () => {
    expect(neverFitsReason(8, {}, nodes, 3)).toBe('no 3 ONLINE nodes have 8 cards each (2 do; largest: 8)');
    expect(neverFitsReason(8, { zone: 'x' }, nodes, 2)).toBe('no 2 ONLINE nodes matching zone=x have 8 cards each (1 does; largest: 8)');
    expect(neverFitsReason(9, {}, nodes, 2)).toBe('no 2 ONLINE nodes have 9 cards each (none do; largest: 8)');
    expect(neverFitsReason(1, {}, nodes, 4)).toBe('no 4 ONLINE nodes have 1 card each (3 do; largest: 8)');
    expect(neverFitsReason(0, { zone: 'x' }, nodes, 3)).toBe('no 3 ONLINE nodes matching zone=x (2 are)');
    expect(neverFitsReason(2, { zone: 'y' }, nodes, 2)).toBe('no ONLINE node matching zone=y');
    expect(neverFitsReason(4, { zone: 'x' }, nodes, 2)).toBeNull();
    expect(neverFitsReason(8, {}, [], 5)).toBeNull();
  });
});
