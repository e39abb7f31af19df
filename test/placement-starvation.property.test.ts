/**
 * The starvation guard over many passes (domain/placement.ts's header): jobs past the hold time,
 * gangs or not, in any pools, all run in the end, each within a bound, however many small jobs
 * keep arriving behind them. A pass a second; every job runs W passes at most.
 *
 * The bound, for the first job in the order (nothing is placed ahead of it in a pass), of N × g
 * cards on a cluster of K nodes: it reserves, every pass, the N matching nodes with the most free
 * cards (ties: lowest id), holding up to g on each. Count a node's free cards up to g: what the job
 * holds cannot be taken, so Σ, the sum of those counts over its N nodes (the N highest: every node
 * with g free is among them, as fewer than N have), never drops from one pass to the next, and it
 * runs once Σ = N·g. While Σ stays the same the N nodes change only for a node of the same count
 * and a lower id (fewer than N·(K - 1) + 1 times), and the same N nodes cannot stay W passes:
 * nothing is placed on a node whose free cards are all held, so by then its jobs have ended and it
 * has its g. So it runs within (N·g + 1)·(N·(K - 1) + 1)·W + 1 passes; then the next job is the
 * first, and so on.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { placementMembers, planPlacements, type NodeRoom, type QueuedJob } from '../domain/placement.ts';
import { prng } from './support/prng.ts';

const t0 = Date.parse('2026-01-01T00:00:00Z');
const HOLD_S = 5;
const W = 6;


const clusterArb = fc.array(fc.record({ total: fc.constantFrom(2, 4, 8), busy: fc.integer({ min: 0, max: 8 }), zone: fc.boolean() }), { minLength: 2, maxLength: 6 });
const starvedArb = fc.array(fc.record({ gpus: fc.integer({ min: 1, max: 8 }), nodes: fc.integer({ min: 1, max: 3 }), zone: fc.boolean() }), { minLength: 1, maxLength: 4 });

describe('the starvation guard over many passes', () => {
  it('runs every job past the hold time in the end, gangs too, within the bound, under a stream of small jobs behind them', () => {
    fc.assert(
      fc.property(clusterArb, starvedArb, fc.integer(), (cluster, starvedSpecs, seed) => {
        const nodes = cluster.map((n, i) => ({ id: `n${i}`, total: n.total, labels: n.zone ? { zone: 'x' } : ({} as Record<string, string>) }));
        const capable = (gpus: number, selector: Record<string, string>) => nodes.filter((n) => n.total >= gpus && Object.entries(selector).every(([k, v]) => n.labels[k] === v)).length;
        // Past the hold time from the first pass, in this order, every one of them able to fit.
        const starved: QueuedJob[] = starvedSpecs.map((s, i) => {
          const selector: Record<string, string> = s.zone ? { zone: 'x' } : {};
          return { id: `old${i}`, attempt: 1, gpus: s.gpus, nodes: s.nodes, selector, priority: 0, queuedAt: new Date(t0 - (HOLD_S + 10) * 1000 + i) };
        });
        fc.pre(starved.every((j) => capable(j.gpus, j.selector) >= (j.nodes ?? 1)));
        const rnd = prng(seed);
        // Cards in use: node id and card → the pass it comes free.
        const busyUntil = new Map<string, number>();
        nodes.forEach((n, i) => {
          for (let c = 0; c < Math.min(cluster[i].busy, n.total); c++) busyUntil.set(`${n.id}/${c}`, 1 + Math.floor(rnd() * W));
        });
        const bound = (j: QueuedJob) => ((j.nodes ?? 1) * j.gpus + 1) * ((j.nodes ?? 1) * (nodes.length - 1) + 1) * W + 1;
        const deadline = new Map<string, number>();
        starved.reduce((sum, j) => (deadline.set(j.id, sum + bound(j)), sum + bound(j)), 0);
        const last = Math.max(...deadline.values());
        const queue = [...starved];
        const placedAt = new Map<string, number>();
        let streamed = 0;
        for (let pass = 0; pass <= last && starved.some((j) => !placedAt.has(j.id)); pass++) {
          for (const [card, until] of busyUntil) if (until <= pass) busyUntil.delete(card);
          // Small jobs behind them, 1 to 3 cards, a few 2-node gangs, either pool: as many arrive
          // as keep 20 waiting, so that whatever comes free has a taker.
          for (let k = 0; queue.length - starved.length + placedAt.size < 20; k++) {
            const gang = rnd() < 0.15;
            queue.push({ id: `s${streamed++}`, attempt: 1, gpus: 1 + Math.floor(rnd() * 3), nodes: gang ? 2 : 1, selector: rnd() < 0.5 ? { zone: 'x' } : {}, priority: 0, queuedAt: new Date(t0 + pass * 1000 + k) });
          }
          const rooms: NodeRoom[] = nodes.map((n) => ({ id: n.id, labels: n.labels, totalCards: n.total, free: [...Array(n.total).keys()].filter((c) => !busyUntil.has(`${n.id}/${c}`)) }));
          for (const p of planPlacements(queue, rooms, new Date(t0 + pass * 1000), HOLD_S * 1000)) {
            queue.splice(queue.findIndex((j) => j.id === p.jobId), 1);
            const runs = 1 + Math.floor(rnd() * W);
            for (const m of placementMembers(p)) for (const c of m.gpuIndices) busyUntil.set(`${m.nodeId}/${c}`, pass + runs);
            if (p.jobId.startsWith('old')) placedAt.set(p.jobId, pass);
          }
        }
        for (const j of starved) {
          expect(placedAt.has(j.id), `${j.id} (${j.nodes} × ${j.gpus}) placed`).toBe(true);
          expect(placedAt.get(j.id)!, `${j.id} within its bound`).toBeLessThanOrEqual(deadline.get(j.id)!);
        }
      }),
      { numRuns: 150 },
    );
  });
});
