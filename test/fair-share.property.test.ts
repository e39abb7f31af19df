/**
 * Properties of the order across projects (domain/fair-share.ts) over random queues, quotas,
 * card holders and usage: the rule in its header, one clause at a time, and the decay of usage.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cardsInUse, cardsOf, decayedCardSeconds, fairShareFactor, fairShareOrder, fairShareRanked, fairShareRanking, quotaFor, type CardHolder, type FairShareState, type ProjectQuota, type ShareJob } from '../domain/fair-share.ts';
import { planPlacements, queueOrder, type NodeRoom, type QueuedJob } from '../domain/placement.ts';
import { overQuotaBehindOthers } from '../domain/queue-reasons.ts';

const t0 = Date.parse('2026-01-01T00:00:00Z');
const projects = ['pa', 'pb', 'pc'] as const;
const projectArb = fc.oneof({ weight: 6, arbitrary: fc.constantFrom<string | null>(...projects) }, { weight: 1, arbitrary: fc.constant(null) });
const selectorArb = fc.oneof({ weight: 3, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: fc.constantFrom('a100', 'h100').map((pool) => ({ pool })) });

const queueArb = fc
  .array(
    fc.record({
      projectId: projectArb,
      gpus: fc.integer({ min: 0, max: 4 }),
      nodes: fc.constantFrom(undefined, 1, 2),
      selector: selectorArb,
      priority: fc.integer({ min: 0, max: 2 }),
      age: fc.integer({ min: 0, max: 5 }),
    }),
    { maxLength: 30 },
  )
  .map((specs): ShareJob[] =>
    specs.map((s, i) => {
      const j: ShareJob = { id: `j${String(i).padStart(2, '0')}`, projectId: s.projectId, gpus: s.gpus, selector: s.selector, priority: s.priority, queuedAt: new Date(t0 - s.age * 1000) };
      if (s.nodes !== undefined) j.nodes = s.nodes;
      return j;
    }),
  );

const quotasArb = fc
  .uniqueArray(fc.record({ projectId: fc.constantFrom(...projects), pool: fc.constantFrom(null, 'pool=a100', 'pool=h100'), gpus: fc.integer({ min: 0, max: 8 }) }), {
    selector: (q) => `${q.projectId}/${q.pool}`,
    maxLength: 6,
  })
  .map((qs): ProjectQuota[] => qs);

const holdersArb = fc.array(fc.record({ projectId: projectArb, selector: selectorArb, cards: fc.integer({ min: 0, max: 4 }) }), { maxLength: 8 }).map((hs): CardHolder[] => hs);

const usageArb = fc.record({ pa: fc.constantFrom(0, 10, 500), pb: fc.constantFrom(0, 10, 500), pc: fc.constantFrom(0, 10, 500), '': fc.constantFrom(0, 10) }).map((u) => new Map(Object.entries(u)));

const stateArb = fc.record({ quotas: quotasArb, holders: holdersArb, usage: usageArb }).map((s): FairShareState => s);

const ids = (js: readonly ShareJob[]) => js.map((j) => j.id);
const usageOf = (s: FairShareState, j: ShareJob) => s.usage.get(j.projectId ?? '') ?? 0;
const quotaKey = (s: FairShareState, j: ShareJob) => {
  const q = quotaFor(j.projectId, j.selector, s.quotas);
  return q ? `${q.projectId}/${q.pool}` : `none/${j.projectId}`;
};

describe('fair-share order', () => {
  it('is a permutation of the queue, and the same whatever order the queue comes in', () => {
    fc.assert(
      fc.property(queueArb.chain((q) => fc.tuple(fc.constant(q), fc.shuffledSubarray(q, { minLength: q.length, maxLength: q.length }))), stateArb, ([q, shuffled], s) => {
        const order = fairShareOrder(q, s);
        expect([...ids(order)].sort()).toEqual([...ids(q)].sort());
        expect(ids(fairShareOrder(shuffled, s))).toEqual(ids(order));
      }),
    );
  });

  it('serves every job within quota before every job over it', () => {
    fc.assert(
      fc.property(queueArb, stateArb, (q, s) => {
        const ranked = fairShareRanking(q, s);
        const firstOver = ranked.findIndex((r) => !r.withinQuota);
        if (firstOver >= 0) expect(ranked.slice(firstOver).every((r) => !r.withinQuota)).toBe(true);
      }),
    );
  });

  it('counts as within quota no more cards than each quota has left', () => {
    fc.assert(
      fc.property(queueArb, stateArb, (q, s) => {
        const used = cardsInUse(s);
        for (const r of fairShareRanking(q, s)) {
          const quota = quotaFor(r.job.projectId, r.job.selector, s.quotas);
          if (!r.withinQuota) continue;
          expect(quota).not.toBeNull();
          if (!quota) continue;
          const k = `${quota.projectId}\u0000${quota.pool ?? ''}`;
          used.set(k, (used.get(k) ?? 0) + cardsOf(r.job));
          expect(used.get(k)).toBeLessThanOrEqual(quota.gpus);
        }
      }),
    );
  });

  it('puts the project with less recent usage first inside a class', () => {
    fc.assert(
      fc.property(queueArb, stateArb, (q, s) => {
        const ranked = fairShareRanking(q, s);
        for (let i = 1; i < ranked.length; i++) {
          if (ranked[i].withinQuota !== ranked[i - 1].withinQuota) continue;
          expect(usageOf(s, ranked[i - 1].job)).toBeLessThanOrEqual(usageOf(s, ranked[i].job));
        }
      }),
    );
  });

  it('keeps priority, then submit time, between the jobs of one project and quota', () => {
    fc.assert(
      fc.property(queueArb, stateArb, (q, s) => {
        const order = fairShareOrder(q, s);
        const groups = new Map<string, ShareJob[]>();
        for (const j of order) groups.set(quotaKey(s, j), [...(groups.get(quotaKey(s, j)) ?? []), j]);
        for (const g of groups.values()) expect(ids(g)).toEqual(ids([...g].sort((a, b) => queueOrder({ ...a, attempt: 1 }, { ...b, attempt: 1 }))));
      }),
    );
  });

  it('is the old order (priority, submit time, id) when there are no quotas and no usage', () => {
    fc.assert(
      fc.property(queueArb, (q) => {
        const order = fairShareOrder(q, { quotas: [], holders: [], usage: new Map() });
        expect(ids(order)).toEqual(ids([...q].sort((a, b) => queueOrder({ ...a, attempt: 1 }, { ...b, attempt: 1 }))));
      }),
    );
  });

  it('is the same taken lazily (fairShareRanked): whole, and as far as a caller takes it', () => {
    fc.assert(
      fc.property(queueArb, stateArb, fc.nat({ max: 32 }), (q, s, k) => {
        const full = fairShareRanking(q, s).map((r) => [r.job.id, r.withinQuota]);
        expect([...fairShareRanked(q, s)].map((r) => [r.job.id, r.withinQuota])).toEqual(full);
        const head: unknown[] = [];
        for (const r of fairShareRanked(q, s)) {
          if (head.length === k) break;
          head.push([r.job.id, r.withinQuota]);
        }
        expect(head).toEqual(full.slice(0, k));
      }),
    );
  });

  it('is the old order (priority, submit time, id) for jobs of one project and quotas over the whole cluster', () => {
    // The scheduling pass relies on it: without a fair-share state (one project queues, no quota
    // names a pool) it takes the waiters' classes from this ranking in the plain order.
    const wholeCluster = quotasArb.map((qs) => qs.filter((x) => x.pool === null));
    fc.assert(
      fc.property(queueArb, fc.constantFrom<string | null>(...projects, null), wholeCluster, holdersArb, (q, project, quotas, holders) => {
        const mine = q.map((j) => ({ ...j, projectId: project }));
        const order = fairShareOrder(mine, { quotas, holders, usage: new Map() });
        expect(ids(order)).toEqual(ids([...mine].sort((a, b) => queueOrder({ ...a, attempt: 1 }, { ...b, attempt: 1 }))));
      }),
    );
  });

  it('serves a project under its quota before one over it, and the less used of two over quota first', () => {
    const job = (id: string, projectId: string, priority = 0): ShareJob => ({ id, projectId, gpus: 2, selector: {}, priority, queuedAt: new Date(t0) });
    const s: FairShareState = {
      quotas: [{ projectId: 'pa', pool: null, gpus: 4 }],
      holders: [{ projectId: 'pa', selector: {}, cards: 2 }],
      usage: new Map([['pa', 9000], ['pb', 100], ['pc', 50]]),
    };
    // pa has 2 of 4 cards left: its first job is within quota, its second borrows.
    expect(ids(fairShareOrder([job('b1', 'pb', 5), job('a1', 'pa'), job('a2', 'pa'), job('c1', 'pc')], s))).toEqual(['a1', 'c1', 'b1', 'a2']);
  });
});

describe('the worked example of docs/architecture.md ("Quotas and fair share")', () => {
  it('orders v2, a1, n1, v1, places v2 and a1 on three free cards, and tells n1 and v1 why they wait', () => {
    const at = (hhmm: string) => new Date(`2026-01-01T${hhmm}:00Z`);
    const queue: QueuedJob[] = [
      { id: 'v1', projectId: 'vision', attempt: 1, gpus: 1, selector: {}, priority: 0, queuedAt: at('10:00') },
      { id: 'v2', projectId: 'vision', attempt: 1, gpus: 1, selector: {}, priority: 5, queuedAt: at('10:05') },
      { id: 'n1', projectId: 'nlp', attempt: 1, gpus: 1, selector: {}, priority: 9, queuedAt: at('09:00') },
      { id: 'a1', projectId: 'audio', attempt: 1, gpus: 2, selector: {}, priority: 0, queuedAt: at('11:00') },
    ];
    const s: FairShareState = {
      quotas: [
        { projectId: 'vision', pool: null, gpus: 4 },
        { projectId: 'nlp', pool: null, gpus: 2 },
      ],
      holders: [
        { projectId: 'vision', selector: {}, cards: 3 },
        { projectId: 'nlp', selector: {}, cards: 4 },
      ],
      usage: new Map([['vision', 40 * 3600], ['nlp', 10 * 3600], ['audio', 2 * 3600]]),
    };
    expect(fairShareRanking(queue, s).map((r) => [r.job.id, r.withinQuota])).toEqual([['v2', true], ['a1', false], ['n1', false], ['v1', false]]);
    expect([40, 10, 2].map((u) => fairShareFactor(u, 52).toFixed(3))).toEqual(['0.587', '0.875', '0.974']);
    // Ten cards, seven held: three free, on one node.
    const rooms: NodeRoom[] = [{ id: 'n', labels: {}, totalCards: 10, free: [7, 8, 9] }];
    const now = at('12:00');
    expect(planPlacements(queue, rooms, now, 3_600_000, undefined, s).map((p) => p.jobId)).toEqual(['v2', 'a1']);
    // a1 too is over quota behind another project's job, but the cards left fit it: it is placed.
    expect([...overQuotaBehindOthers(queue, s)].sort()).toEqual(['a1', 'n1', 'v1']);
  });
});

describe('decayed usage', () => {
  const H = 3_600_000;
  const span = fc.tuple(fc.integer({ min: 0, max: 10 * H }), fc.integer({ min: 0, max: 10 * H })).map(([a, b]) => (a <= b ? [a, b] : [b, a]));

  it('halves with every half-life that passes', () => {
    fc.assert(
      fc.property(span, fc.integer({ min: 1, max: 8 }), ([s, e], cards) => {
        const now = 10 * H;
        expect(decayedCardSeconds(cards, s, e, now + H, H)).toBeCloseTo(decayedCardSeconds(cards, s, e, now, H) / 2, 6);
      }),
    );
  });

  it('adds up over split spans, and is card-seconds for spans just ended', () => {
    fc.assert(
      fc.property(span, fc.integer({ min: 1, max: 8 }), ([s, e], cards) => {
        const m = Math.floor((s + e) / 2);
        const now = 10 * H;
        expect(decayedCardSeconds(cards, s, m, now, H) + decayedCardSeconds(cards, m, e, now, H)).toBeCloseTo(decayedCardSeconds(cards, s, e, now, H), 6);
      }),
    );
    expect(decayedCardSeconds(4, 0, 1000, 1000, 1e15)).toBeCloseTo(4, 6);
    expect(decayedCardSeconds(4, 1000, 1000, 1000, H)).toBe(0);
  });

  it('gives a factor that falls as usage grows: 1 for none, 0.5 for all of it', () => {
    expect(fairShareFactor(0, 100)).toBe(1);
    expect(fairShareFactor(100, 100)).toBe(0.5);
    expect(fairShareFactor(0, 0)).toBe(1);
    fc.assert(fc.property(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 100 }), (a, b) => (a <= b ? fairShareFactor(a, 100) >= fairShareFactor(b, 100) : true)));
  });
});
