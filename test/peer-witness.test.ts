/**
 * Properties of the peer-witness rules (domain/peer-witness.ts, domain/witness-assignment.ts)
 * over random schedules. A small simulated world: n nodes heartbeat every second (each at its
 * own phase) to the control plane and to their witnesses, witnesses report every second, every
 * message takes the same latency ℓ ≤ 500 ms, and a schedule drops what the control plane or a
 * peer hears, kills nodes, or makes one witness lie. The rules are evaluated on what the control
 * plane would have received by then.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LOST_AFTER_S, livenessPlan } from '../domain/liveness.ts';
import {
  acceptAttemptReport,
  clusterHeardSince,
  clusterVerdicts,
  DEFAULT_WITNESS_SETTINGS,
  nodeSideVerdict,
  nodeVerdict,
  WITNESS_REPORT_INTERVAL_MS,
  type ClusterView,
  type DeadAttempt,
  type HeardStretch,
  type NodeSideView,
  type WitnessReport,
} from '../domain/peer-witness.ts';
import { assignWitnesses } from '../domain/witness-assignment.ts';

const I = WITNESS_REPORT_INTERVAL_MS;
const S = DEFAULT_WITNESS_SETTINGS;
const D = S.deadAfterMs;
const MAX_LATENCY = 500;
/** The detection bound: the last heartbeat arrives ≤ t0 + ℓ, a witness's report that it has been silent for D goes out within I after t0 + ℓ + D and arrives ℓ later. */
const detectionBound = (latency: number) => D + I + 2 * latency;
const plan = livenessPlan(DEFAULT_LOST_AFTER_S * 1000, 10_000);
const HORIZON = 100_000;
/** The control plane evaluates this often (at most WITNESS_REPORT_INTERVAL_MS apart), folding clusterHeardSince. */
const EVAL_STEP = 500;

interface World {
  ids: string[];
  phase: Map<string, number>;
  latency: number;
  witnesses: Map<string, string[]>;
  diedAt: Map<string, number>;
  /** Whether the control plane receives the heartbeat `from` sent at `sentAt` (and `from` hears the control plane's answer). */
  cpHears: (from: string, sentAt: number) => boolean;
  /** Whether the control plane receives the witness report `from` sent at `sentAt` (default: cpHears). */
  cpHearsReports?: (from: string, sentAt: number) => boolean;
  /** Whether `to` receives what `from` sent it at `sentAt`. */
  peerHears: (from: string, to: string, sentAt: number) => boolean;
  /** One lying witness: the lastHeardAt it claims about `subject` in a report received at `receivedAt`. */
  liar?: { id: string; claim: (subject: string, receivedAt: number) => number };
  /** Filled on first use, once the schedule is set: each node's heartbeat arrivals at the control plane, and the stretch at each EVAL_STEP. */
  memo?: { arrivals: Map<string, number[]>; stretches: (HeardStretch | null)[] };
}

const alive = (w: World, id: string, t: number) => !(w.diedAt.get(id)! <= t);

/** The receive time of the latest message `id` sent (every I from its phase) that arrived by t and passed `ok`; 0 (the start, when everybody heard everybody) if none. */
function lastArrival(w: World, id: string, t: number, ok: (sentAt: number) => boolean): number {
  const phase = w.phase.get(id)!;
  for (let m = Math.floor((t - w.latency - phase) / I); m >= 0; m--) {
    const x = phase + m * I;
    if (ok(x)) return x + w.latency;
  }
  return 0;
}

function memo(w: World) {
  if (!w.memo) {
    const arrivals = new Map<string, number[]>();
    for (const id of w.ids) {
      const times: number[] = [];
      for (let x = w.phase.get(id)!; x < 2 * HORIZON; x += I) if (alive(w, id, x) && w.cpHears(id, x)) times.push(x + w.latency);
      arrivals.set(id, times);
    }
    w.memo = { arrivals, stretches: [] };
  }
  return w.memo;
}

/** When the control plane last heard a node's heartbeat (0: the start). */
function cpLastHeard(w: World, id: string, t: number): number {
  const times = memo(w).arrivals.get(id)!;
  let lo = 0;
  let hi = times.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid] <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? 0 : times[lo - 1];
}

const lastHeardAt = (w: World, t: number) => new Map(w.ids.map((id) => [id, cpLastHeard(w, id, t)]));

/** The stretch as a control plane evaluating every EVAL_STEP, and at t, has it at t. */
function heardSinceAt(w: World, t: number): number | null {
  const m = memo(w);
  const k = Math.floor(t / EVAL_STEP);
  for (let i = m.stretches.length; i <= k; i++) {
    const at = i * EVAL_STEP;
    m.stretches.push(clusterHeardSince(i === 0 ? { since: 0, checkedAt: 0 } : m.stretches[i - 1], at, lastHeardAt(w, at)));
  }
  return clusterHeardSince(m.stretches[k], t, lastHeardAt(w, t))?.since ?? null;
}
const peerLastHeard = (w: World, to: string, from: string, t: number) => lastArrival(w, from, t, (x) => alive(w, from, x) && alive(w, to, x + w.latency) && w.peerHears(from, to, x));

/** The reports the control plane holds at t: each witness's latest one about each subject, the liar's lies (about every node, twice). */
function reportsAt(w: World, t: number): WitnessReport[] {
  const reports: WitnessReport[] = [];
  for (const [subject, ws] of w.witnesses) {
    for (const witness of ws) {
      const receivedAt = lastArrival(w, witness, t, (x) => alive(w, witness, x) && (w.cpHearsReports ?? w.cpHears)(witness, x));
      if (receivedAt === 0) continue;
      const sentAt = receivedAt - w.latency;
      const age = sentAt - peerLastHeard(w, witness, subject, sentAt);
      if (witness !== w.liar?.id) reports.push({ witness, subject, receivedAt, lastHeardAt: receivedAt - age });
    }
  }
  if (w.liar) {
    const liar = w.liar;
    const receivedAt = lastArrival(w, liar.id, t, (x) => alive(w, liar.id, x) && (w.cpHearsReports ?? w.cpHears)(liar.id, x));
    if (receivedAt > 0) {
      for (const subject of w.ids) {
        reports.push({ witness: liar.id, subject, receivedAt, lastHeardAt: liar.claim(subject, receivedAt) });
        reports.push({ witness: liar.id, subject, receivedAt: receivedAt - 1, lastHeardAt: liar.claim(subject, receivedAt - 1) });
      }
    }
  }
  return reports;
}

function viewAt(w: World, t: number): ClusterView {
  return { now: t, lastHeard: lastHeardAt(w, t), witnesses: w.witnesses, reports: reportsAt(w, t), heardSince: heardSinceAt(w, t) };
}

function nodeSideAt(w: World, id: string, t: number): NodeSideView {
  const peers = new Set([...(w.witnesses.get(id) ?? []), ...w.ids.filter((s) => w.witnesses.get(s)?.includes(id))]);
  return {
    now: t,
    controlPlaneLastHeardAt: cpLastHeard(w, id, t),
    peers: [...peers].map((peer) => {
      const lastHeardAt = peerLastHeard(w, id, peer, t);
      return { peer, lastHeardAt, peerLastHeardControlPlaneAt: cpLastHeard(w, peer, lastHeardAt - w.latency) };
    }),
  };
}

const baseArb = fc.integer({ min: 2, max: 50 }).chain((n) =>
  fc.record({
    n: fc.constant(n),
    phases: fc.array(fc.integer({ min: 0, max: I - 1 }), { minLength: n, maxLength: n }),
    latency: fc.integer({ min: 0, max: MAX_LATENCY }),
    times: fc.array(fc.integer({ min: 0, max: HORIZON }), { minLength: 1, maxLength: 6 }),
  }),
);

function world(b: { n: number; phases: number[]; latency: number }, parts: Partial<World> = {}): World {
  const ids = Array.from({ length: b.n }, (_, i) => `gpu-${i}`);
  return {
    ids,
    phase: new Map(ids.map((id, i) => [id, b.phases[i]])),
    latency: b.latency,
    witnesses: assignWitnesses(ids, S.k),
    diedAt: new Map(),
    cpHears: () => true,
    peerHears: () => true,
    ...parts,
  };
}

/** Windows in which the control plane hears nothing from some nodes (all of them, or a random subset), up to and beyond 60 s long. */
const cpLossArb = fc.array(
  fc.record({ from: fc.integer({ min: 0, max: HORIZON }), length: fc.integer({ min: 0, max: 90_000 }), all: fc.boolean(), nodes: fc.array(fc.integer({ min: 0, max: 49 }), { maxLength: 30 }) }),
  { maxLength: 4 },
);
type CpLoss = { from: number; length: number; all: boolean; nodes: number[] }[];
const cpHearsExcept = (loss: CpLoss) => (id: string, x: number) =>
  !loss.some((l) => x >= l.from && x < l.from + l.length && (l.all || l.nodes.includes(Number(id.slice(4)))));

const deadIn = (w: World, t: number) => [...clusterVerdicts(viewAt(w, t))].filter(([, v]) => v.verdict === 'dead').map(([id]) => id);

describe('peer-witness verdicts', () => {
  it('lets no single lying witness get a live node declared dead, whatever the control plane misses', () => {
    fc.assert(
      fc.property(baseArb, cpLossArb, fc.nat(), fc.boolean(), (b, loss, liarPick, claimSilence) => {
        const w = world(b, { cpHears: cpHearsExcept(loss) });
        const liar = w.ids[liarPick % b.n];
        w.liar = { id: liar, claim: (_s, r) => (claimSilence ? r - 10 * D : r) };
        for (const t of b.times) expect(deadIn(w, t)).toEqual([]);
      }),
      { numRuns: 60 },
    );
  });

  it('declares nobody dead in a control-plane outage alone, and no node fences before fence-after', () => {
    fc.assert(
      fc.property(baseArb, cpLossArb, (b, loss) => {
        const w = world(b, { cpHears: cpHearsExcept(loss) });
        for (const t of b.times) {
          expect(deadIn(w, t)).toEqual([]);
          for (const id of w.ids.slice(0, 5)) {
            const view = nodeSideAt(w, id, t);
            const fenced = nodeSideVerdict(view, plan).verdict === 'fence';
            expect(fenced).toBe(t - view.controlPlaneLastHeardAt >= plan.fenceAfterMs);
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it('declares nobody dead in a network-wide outage (no heartbeat reaches the control plane or a peer) even if the witnesses\' reports still arrive', () => {
    // outages a little shorter or longer than deadAfter are the ones where a straggler could be caught
    const lengthArb = fc.oneof(fc.integer({ min: 1000, max: 90_000 }), fc.integer({ min: D - 2 * I, max: D + 2 * I }));
    fc.assert(
      fc.property(baseArb, fc.integer({ min: 0, max: 40_000 }), lengthArb, (b, from, length) => {
        fc.pre(b.n >= 3);
        const down = (x: number) => x >= from && x < from + length;
        // the reports travel on a path of their own (the API, say), which stays up
        const w = world(b, { cpHears: (_id, x) => !down(x), peerHears: (_f, _to, x) => !down(x), cpHearsReports: () => true });
        const end = from + length;
        for (const t of [...b.times, from + length / 2, ...Array.from({ length: 40 }, (_, i) => end + i * 250)]) expect(deadIn(w, t)).toEqual([]);
      }),
      { numRuns: 80 },
    );
  });

  it('kills nothing in one outage of the whole control plane of up to 60 s: nobody dead, nobody fences, every node says outage', () => {
    fc.assert(
      fc.property(baseArb, fc.integer({ min: 1000, max: 60_000 }), fc.integer({ min: 0, max: 30_000 }), (b, length, from) => {
        const w = world(b, { cpHears: (_id, x) => !(x >= from && x < from + length) });
        const times = [...b.times.map((t) => from + (t % (length + 10_000))), from + length];
        for (const t of times) {
          expect(deadIn(w, t)).toEqual([]);
          for (const id of w.ids.slice(0, 5)) {
            const view = nodeSideAt(w, id, t);
            const side = nodeSideVerdict(view, plan);
            expect(side.verdict).not.toBe('fence');
            if (t - view.controlPlaneLastHeardAt >= D) expect(side.verdict).toBe('outage');
          }
        }
      }),
      { numRuns: 40 },
    );
  });

  it(`declares a node that died dead within deadAfter + I + 2ℓ (${detectionBound(MAX_LATENCY) / 1000} s with the defaults), even with a witness lying that it hears it`, () => {
    fc.assert(
      fc.property(baseArb, fc.integer({ min: 5000, max: 60_000 }), fc.nat(), fc.nat(), (b, t0, pick, liarPick) => {
        fc.pre(b.n >= 3);
        const w = world(b);
        const victim = w.ids[pick % b.n];
        w.diedAt.set(victim, t0);
        const ws = w.witnesses.get(victim)!;
        if (ws.length >= 3) w.liar = { id: ws[liarPick % ws.length], claim: (_s, r) => r };
        const bound = t0 + detectionBound(w.latency);
        // its last heartbeat went out after t0 − I, so nobody has missed it for D before t0 − I + D
        for (let t = 0; t <= t0 - I + D; t += 997) expect(nodeVerdict(victim, viewAt(w, t)).verdict).not.toBe('dead');
        for (const t of [bound, bound + 1000, bound + 20_000]) {
          const v = nodeVerdict(victim, viewAt(w, t));
          expect(v.verdict, v.reason).toBe('dead');
        }
        expect(deadIn(w, bound + 5000)).toEqual([victim]);
      }),
      { numRuns: 60 },
    );
  });

  it('never declares a node of a two-node cluster dead: one witness is too few', () => {
    fc.assert(
      fc.property(fc.tuple(fc.nat(I - 1), fc.nat(I - 1)), fc.integer({ min: 0, max: MAX_LATENCY }), fc.integer({ min: 0, max: 60_000 }), (phases, latency, t0) => {
        const w = world({ n: 2, phases, latency });
        w.diedAt.set('gpu-0', t0);
        for (const t of [t0 + 10_000, t0 + 60_000]) expect(nodeVerdict('gpu-0', viewAt(w, t)).verdict).toBe('suspect');
      }),
      { numRuns: 10 },
    );
    const b = { n: 2, phases: [0, 500], latency: 100 };
    const w = world(b);
    w.diedAt.set('gpu-0', 10_000);
    expect(nodeVerdict('gpu-0', viewAt(w, 30_000))).toMatchObject({ verdict: 'suspect', reason: expect.stringContaining('too few') });
  });

  it('calls a one-way partition (the control plane cannot hear a node, a majority of its witnesses can) suspect, never dead', () => {
    fc.assert(
      fc.property(baseArb, fc.nat(), fc.integer({ min: 0, max: 60_000 }), fc.integer({ min: 1000, max: 90_000 }), fc.nat(), (b, pick, from, length, blindPick) => {
        const w = world(b);
        const node = w.ids[pick % b.n];
        const ws = w.witnesses.get(node)!;
        const minority = Math.ceil(ws.length / 2) - 1;
        const blind = new Set(ws.filter((_, i) => (i + blindPick) % ws.length < minority));
        const cut = (x: number) => x >= from && x < from + length;
        w.cpHears = (id, x) => id !== node || !cut(x);
        w.peerHears = (f, to, x) => !(f === node && blind.has(to) && cut(x));
        for (const t of [...b.times, from + length / 2, from + length]) {
          const v = nodeVerdict(node, viewAt(w, t));
          expect(v.verdict).not.toBe('dead');
          if (t - from >= D + I + w.latency && t < from + length) expect(v.verdict, v.reason).toBe('suspect');
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe('attempt fencing', () => {
  it('accepts no report of an attempt from the moment it is declared dead, and accepts the next attempt', () => {
    const deadArb = fc.array(fc.record({ jobId: fc.constantFrom('j1', 'j2'), attempt: fc.integer({ min: 1, max: 4 }), nodeId: fc.constantFrom('a', 'b'), declaredAt: fc.integer({ min: 0, max: 1000 }) }), { maxLength: 5 });
    const reportArb = fc.record({ jobId: fc.constantFrom('j1', 'j2'), attempt: fc.integer({ min: 1, max: 5 }), nodeId: fc.constantFrom('a', 'b', 'c'), receivedAt: fc.integer({ min: 0, max: 1000 }) });
    fc.assert(
      fc.property(deadArb, fc.array(reportArb, { maxLength: 20 }), (dead: DeadAttempt[], reports) => {
        for (const r of reports) {
          const fenced = dead.some((d) => d.jobId === r.jobId && d.attempt === r.attempt && d.declaredAt <= r.receivedAt);
          const newer = dead.every((d) => d.jobId !== r.jobId || d.attempt < r.attempt);
          const { accept } = acceptAttemptReport(r, dead);
          if (fenced) expect(accept).toBe(false);
          if (newer) expect(accept).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('lets no effect of an attempt on a cut-off node in after it was declared dead, while its process runs on until fence-after', () => {
    fc.assert(
      fc.property(baseArb, fc.nat(), fc.integer({ min: 5000, max: 30_000 }), fc.integer({ min: 8000, max: 90_000 }), (b, pick, t0, cutFor) => {
        fc.pre(b.n >= 3);
        const w = world(b);
        const node = w.ids[pick % b.n];
        const cut = (x: number) => x >= t0 && x < t0 + cutFor;
        w.cpHears = (id, x) => id !== node || !cut(x);
        w.peerHears = (f, to, x) => !((f === node || to === node) && cut(x));
        let declaredAt = -1;
        for (const t of [...Array.from({ length: 70 }, (_, i) => t0 + i * 100), t0 + detectionBound(w.latency)]) {
          if (nodeVerdict(node, viewAt(w, t)).verdict === 'dead') {
            declaredAt = t;
            break;
          }
        }
        if (cutFor < detectionBound(w.latency) + I) return;
        expect(declaredAt).toBeGreaterThan(0);
        const dead: DeadAttempt[] = [{ jobId: 'j', attempt: 1, nodeId: node, declaredAt }];
        // the old process reports every second until its node fences (or to the horizon once the cut heals)
        for (let x = w.phase.get(node)!; x < t0 + cutFor + 10_000; x += I) {
          if (nodeSideVerdict(nodeSideAt(w, node, x), plan).verdict === 'fence') break;
          if (!w.cpHears(node, x)) continue;
          const receivedAt = x + w.latency;
          expect(acceptAttemptReport({ jobId: 'j', attempt: 1, nodeId: node, receivedAt }, dead).accept).toBe(receivedAt < declaredAt);
        }
        expect(acceptAttemptReport({ jobId: 'j', attempt: 2, nodeId: w.ids.find((id) => id !== node)!, receivedAt: declaredAt + 1 }, dead).accept).toBe(true);
      }),
      { numRuns: 40 },
    );
  });
});

describe('witness assignment', () => {
  const idsArb = fc.uniqueArray(fc.stringMatching(/^[a-z0-9.-]{1,10}$/), { minLength: 1, maxLength: 60 });
  const kArb = fc.integer({ min: 1, max: 6 });
  const changed = (before: Map<string, string[]>, after: Map<string, string[]>) =>
    [...after].filter(([id, ws]) => before.has(id) && ws.join() !== before.get(id)!.join());

  it('gives every node min(k, n − 1) distinct witnesses, never itself, and every node as many to watch, in any input order', () => {
    fc.assert(
      fc.property(idsArb.chain((ids) => fc.tuple(fc.constant(ids), fc.shuffledSubarray(ids, { minLength: ids.length }))), kArb, ([ids, shuffled], k) => {
        const a = assignWitnesses(ids, k);
        const per = Math.min(k, ids.length - 1);
        const watches = new Map(ids.map((id) => [id, 0]));
        for (const [id, ws] of a) {
          expect(ws).not.toContain(id);
          expect(new Set(ws).size).toBe(per);
          for (const x of ws) watches.set(x, watches.get(x)! + 1);
        }
        expect([...watches.values()].every((c) => c === per)).toBe(true);
        expect([...assignWitnesses(shuffled, k)].sort()).toEqual([...a].sort());
      }),
      { numRuns: 200 },
    );
  });

  it('changes at most k nodes\' witnesses, by one witness each, when one node leaves or joins', () => {
    fc.assert(
      fc.property(idsArb.filter((ids) => ids.length >= 2), kArb, fc.nat(), (ids, k, pick) => {
        const leaver = ids[pick % ids.length];
        const before = assignWitnesses(ids, k);
        const after = assignWitnesses(ids.filter((id) => id !== leaver), k);
        for (const [from, to] of [
          [before, after],
          [after, before],
        ]) {
          const moved = changed(from, to);
          expect(moved.length).toBeLessThanOrEqual(k);
          for (const [id, ws] of moved) expect(ws.filter((x) => !from.get(id)!.includes(x)).length).toBeLessThanOrEqual(1);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('peer-witness verdicts, by example', () => {
  const now = 100_000;
  const ids = ['a', 'b', 'c', 'd', 'e'];
  const witnesses = new Map(ids.map((id, i) => [id, [1, 2, 3].map((j) => ids[(i + j) % ids.length])]));
  const heard = (silent: Record<string, number>) => new Map(ids.map((id) => [id, id in silent ? now - silent[id] : now - 300]));
  const report = (witness: string, subject: string, silentMs: number, age = 200): WitnessReport => ({ witness, subject, receivedAt: now - age, lastHeardAt: now - age - silentMs });

  it('says why, in one line, for each verdict', () => {
    const lastHeard = heard({ a: 7000 });
    const dead = nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: [report('b', 'a', 6000), report('c', 'a', 6500), report('d', 'a', 100)] });
    expect(dead).toEqual({ verdict: 'dead', reason: "silent for 7.0 s; 2 of 3 witnesses have not heard it for 5.0 s either, while 4 of 4 other nodes are heard" });
    const partial = nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: [report('b', 'a', 6000), report('c', 'a', 300), report('d', 'a', 100)] });
    expect(partial).toEqual({ verdict: 'suspect', reason: 'silent for 7.0 s, but 2 of 3 witnesses still hear it: a partial partition, no new attempts on it' });
    const waiting = nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: [report('b', 'a', 6000)] });
    expect(waiting.reason).toBe('silent for 7.0 s; 1 of 3 witnesses confirm (2 needed), so it is LOST after lost-after unless more do');
    const outage = nodeVerdict('a', { now, lastHeard: heard({ a: 7000, b: 7000, c: 7000 }), witnesses, heardSince: 0, reports: [] });
    expect(outage).toEqual({ verdict: 'outage', reason: 'silent for 7.0 s, but the control plane hears only 2 of 4 other nodes normally: its own outage, nobody is declared dead' });
    const back = nodeVerdict('a', { now, lastHeard, witnesses, heardSince: now - 3000, reports: [report('b', 'a', 6000), report('c', 'a', 6500)] });
    expect(back).toEqual({ verdict: 'suspect', reason: 'silent for 7.0 s, but the rest of the cluster is heard again for only 3.0 s: no verdict before 5.0 s' });
    expect(nodeVerdict('b', { now, lastHeard, witnesses, heardSince: 0, reports: [] })).toEqual({ verdict: 'fine', reason: 'heard 0.3 s ago' });
  });

  it('starts a new stretch of the cluster heard when it was not, or when the control plane did not look for over a second', () => {
    const all = heard({});
    expect(clusterHeardSince(null, now, all)).toEqual({ since: now, checkedAt: now });
    expect(clusterHeardSince({ since: 1000, checkedAt: now - 1000 }, now, all)).toEqual({ since: 1000, checkedAt: now });
    expect(clusterHeardSince({ since: 1000, checkedAt: now - 1001 }, now, all)).toEqual({ since: now, checkedAt: now });
    expect(clusterHeardSince({ since: 1000, checkedAt: now - 500 }, now, heard({ a: 2500, b: 2500, c: 2500 }))).toBeNull();
    expect(clusterHeardSince({ since: 1000, checkedAt: now - 500 }, now, heard({ a: 2500, b: 2500 }))).toEqual({ since: 1000, checkedAt: now });
  });

  it('counts only fresh reports of assigned witnesses, each witness once', () => {
    const lastHeard = heard({ a: 9000 });
    const stale = [report('b', 'a', 6000, S.deadAfterMs), report('c', 'a', 6000, S.deadAfterMs + 1)];
    expect(nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: stale }).verdict).toBe('suspect');
    const strangers = [report('e', 'a', 6000), report('a', 'a', 6000), report('b', 'a', 6000)];
    expect(nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: strangers }).verdict).toBe('suspect');
    const twice = [report('b', 'a', 6000, 100), report('b', 'a', 6000, 300)];
    expect(nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: twice }).verdict).toBe('suspect');
    const latestWins = [report('b', 'a', 6000, 900), report('b', 'a', 100, 100), report('c', 'a', 6000)];
    expect(nodeVerdict('a', { now, lastHeard, witnesses, heardSince: 0, reports: latestWins }).verdict).toBe('suspect');
  });

  it('keeps a node that lost the control plane running until today\'s fence-after, and says which case it is', () => {
    const side = (cpSilent: number, peers: NodeSideView['peers']) => nodeSideVerdict({ now, controlPlaneLastHeardAt: now - cpSilent, peers }, plan);
    expect(side(plan.fenceAfterMs - 1, []).verdict).toBe('outage');
    expect(side(plan.fenceAfterMs, [{ peer: 'b', lastHeardAt: now, peerLastHeardControlPlaneAt: now - 10 }]).verdict).toBe('fence');
    expect(side(20_000, [{ peer: 'b', lastHeardAt: now - 100, peerLastHeardControlPlaneAt: now - 20_000 }]).reason).toMatch(/^control-plane outage/);
    expect(side(20_000, [{ peer: 'b', lastHeardAt: now - 100, peerLastHeardControlPlaneAt: now - 500 }]).reason).toMatch(/^cut off from the control plane alone/);
    expect(side(20_000, [{ peer: 'b', lastHeardAt: now - 9000 }]).reason).toMatch(/^hears neither/);
    expect(side(1000, []).verdict).toBe('fine');
  });
});
