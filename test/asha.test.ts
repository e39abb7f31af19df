/**
 * ASHA's rule (domain/asha.ts) on recorded rung tables, each decision worked out by hand in the
 * comments: n values at a rung (the new one included) keep the top max(1, ⌊n/3⌋).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ashaBestTrial, ashaNextPromotion, ashaReport, ashaRungSteps, ashaSettings, ashaStopReason, ashaTopTrials, ashaVerdict, emptyAshaState, type AshaDecision, type AshaSettings, type AshaState } from '../domain/asha.ts';
import { validateSweepSpec } from '../domain/sweep-spec.ts';

const MIN: AshaSettings = { minSteps: 1, maxSteps: 27, reductionFactor: 3, goal: 'minimize' };
const MAX: AshaSettings = { ...MIN, goal: 'maximize' };

/** Feeds reports in order; returns the last state and each decision. */
function run(s: AshaSettings, reports: [string, number, number][], state = emptyAshaState(s)): { state: AshaState; decisions: AshaDecision[] } {
  const decisions: AshaDecision[] = [];
  for (const [trial, step, value] of reports) {
    const r = ashaReport(state, { trial, step, value }, s);
    state = r.state;
    decisions.push(r.decision);
  }
  return { state, decisions };
}

const short = (d: AshaDecision) => (d.action === 'stop' ? `stop@${d.rung} cut ${d.cutoff}` : d.action);

/** Nine trials reach rung 0 (step 1), minimizing. */
const RUNG0: [string, number, number][] = [
  ['A', 1, 0.5], // n=1 keep 1: alone, goes on
  ['B', 1, 0.7], // n=2 keep 1: [.5 .7], cut-off .5: stop
  ['C', 1, 0.4], // n=3 keep 1: [.4 .5 .7], cut-off .4: itself, goes on
  ['D', 1, 0.45], // n=4 keep 1: cut-off .4: stop
  ['E', 1, 0.6], // n=5 keep 1: stop
  ['F', 1, 0.42], // n=6 keep 2: [.4 .42 .45 …], cut-off .42: goes on
  ['G', 1, 0.42], // n=7 keep 2: [.4 .42 .42 …], cut-off .42: a tie with the cut-off goes on
  ['H', 1, 0.43], // n=8 keep 2: cut-off .42: stop
  ['I', 1, 0.41], // n=9 keep 3: [.4 .41 .42 .42 …], cut-off .42: goes on
];
const RUNG0_DECISIONS = ['continue', 'stop@0 cut 0.5', 'continue', 'stop@0 cut 0.4', 'stop@0 cut 0.4', 'continue', 'continue', 'stop@0 cut 0.42', 'continue'];

describe('the rungs', () => {
  it('are at min_steps × reduction_factor^k below max_steps, then max_steps', () => {
    expect(ashaRungSteps(MIN)).toEqual([1, 3, 9, 27]);
    expect(ashaRungSteps({ ...MIN, minSteps: 10, maxSteps: 100 })).toEqual([10, 30, 90, 100]);
    expect(ashaRungSteps({ ...MIN, minSteps: 2, maxSteps: 10, reductionFactor: 2 })).toEqual([2, 4, 8, 10]);
  });

  it('come from an asha sweep only', () => {
    const spec = validateSweepSpec({ command: 'x', method: 'asha', max_trials: 9, metric: { name: 'acc', goal: 'maximize' }, parameters: { lr: { values: [1, 2] } }, asha: { min_steps: 1, max_steps: 27, reduction_factor: 3 } });
    expect(ashaSettings(spec)).toEqual(MAX);
    expect(() => ashaSettings({ ...spec, method: 'random', asha: undefined })).toThrow('not an asha sweep with asha and metric set (method random)');
  });
});

describe('a trial reaching a rung', () => {
  it('goes on only within the top 1/reduction_factor of the values recorded there (minimize)', () => {
    const { state, decisions } = run(MIN, RUNG0);
    expect(decisions.map(short)).toEqual(RUNG0_DECISIONS);
    expect(decisions[1]).toEqual({ action: 'stop', recorded: [0], rung: 0, step: 1, value: 0.7, cutoff: 0.5 });
    expect(state.rungs[0].entries.map((e) => e.trial)).toEqual(['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I']);
    expect(state.rungs[0].entries.filter((e) => e.stopped).map((e) => e.trial)).toEqual(['B', 'D', 'E', 'H']);
  });

  it('decides the same, mirrored, when maximizing', () => {
    const { decisions } = run(MAX, RUNG0.map(([t, s, v]) => [t, s, 1 - v]));
    expect(decisions.map((d) => d.action)).toEqual(RUNG0_DECISIONS.map((d) => d.split('@')[0]));
    expect(decisions[7]).toMatchObject({ action: 'stop', value: 1 - 0.43, cutoff: 1 - 0.42 });
  });

  it('says why in the job\'s reason', () => {
    const { decisions } = run(MIN, RUNG0);
    expect(ashaStopReason('swp_7', decisions[1] as Extract<AshaDecision, { action: 'stop' }>)).toBe('stopped by sweep swp_7 at rung 0 (value 0.7, cut-off 0.5)');
    expect(ashaStopReason('swp_7', { rung: 2, value: NaN, cutoff: 1 / 3 })).toBe('stopped by sweep swp_7 at rung 2 (value NaN, cut-off 0.333333)');
  });

  it('stops a NaN or infinite value, which counts at the rung as its worst', () => {
    const { state, decisions } = run(MIN, [
      ['N', 1, NaN], // n=1: alone, but diverged: stop (cut-off NaN)
      ['A', 1, 0.5], // n=2 keep 1: [.5 NaN]: goes on
      ['X', 1, -Infinity], // n=3 keep 1: not finite, worst: stop, cut-off .5
      ['B', 1, 0.6], // n=4 keep 1: cut-off .5: stop
      ['C', 1, 0.55], // n=5 keep 1: stop
      ['D', 1, 0.52], // n=6 keep 2 (the NaN and -Inf count): [.5 .52 …], cut-off .52: goes on
    ]);
    expect(decisions.map(short)).toEqual(['stop@0 cut NaN', 'continue', 'stop@0 cut 0.5', 'stop@0 cut 0.5', 'stop@0 cut 0.5', 'continue']);
    expect(run(MAX, [['A', 1, 0.5], ['P', 1, Infinity]]).decisions.map(short)).toEqual(['continue', 'stop@0 cut 0.5']);
    expect(ashaBestTrial(state, MIN)).toEqual({ trial: 'A', rung: 0, step: 1, value: 0.5 });
  });
});

describe('a report past several rungs at once', () => {
  // A at steps 1 and 3; B's first report is at step 10, past rungs 1, 3 and 9.
  const start = run(MIN, [['A', 1, 0.5], ['A', 3, 0.4]]).state;

  it('is recorded at each rung it passed, in turn, with its one value', () => {
    const { state, decisions } = run(MIN, [['B', 10, 0.3]], start);
    // rung 0: [.5 .3] keep 1, cut-off .3: on; rung 1: [.4 .3]: on; rung 2: alone: on.
    expect(decisions).toEqual([{ action: 'continue', recorded: [0, 1, 2] }]);
    expect(state.rungs.map((r) => r.entries.map((e) => `${e.trial}=${e.value}`))).toEqual([['A=0.5', 'B=0.3'], ['A=0.4', 'B=0.3'], ['B=0.3'], []]);
  });

  it('stops at the first rung it fails, and is recorded at none above it', () => {
    const { state, decisions } = run(MIN, [['B', 10, 0.3], ['C', 5, 0.45]], start);
    // rung 0: [.5 .3 .45] keep 1, cut-off .3: stop there, although .45 would lead nothing at rung 1.
    expect(decisions[1]).toEqual({ action: 'stop', recorded: [0], rung: 0, step: 1, value: 0.45, cutoff: 0.3 });
    expect(state.rungs[1].entries.map((e) => e.trial)).toEqual(['A', 'B']);
  });

  it('past max_steps, completes the trial at the last rung', () => {
    const { state, decisions } = run(MIN, [['B', 10, 0.3], ['D', 30, 0.2]], start);
    expect(decisions[1]).toEqual({ action: 'complete', recorded: [0, 1, 2, 3] });
    expect(ashaBestTrial(state, MIN)).toEqual({ trial: 'D', rung: 3, step: 27, value: 0.2 });
  });
});

describe('a report seen again', () => {
  it('changes nothing, and a stopped trial is told to stop again', () => {
    const first = run(MIN, RUNG0).state;
    const again = ashaReport(first, { trial: 'B', step: 3, value: 0.1 }, MIN);
    expect(again.state).toBe(first);
    expect(again.decision).toEqual({ action: 'stop', recorded: [], rung: 0, step: 1, value: 0.7, cutoff: 0.5 });
    const repeat = ashaReport(first, { trial: 'A', step: 1, value: 0.5 }, MIN);
    expect(repeat.decision).toEqual({ action: 'continue', recorded: [] });
    expect(repeat.state).toEqual(first);
  });
});

describe('the verdict a trial waits for at a rung', () => {
  // Rungs at steps 1, 3, 9 and 27 (the last stops nothing).
  const { state } = run(MIN, [...RUNG0, ['A', 3, 0.3], ['C', 3, 0.35]]);
  it('is pending until the trial is recorded at the highest rung it reached, then continue', () => {
    expect(ashaVerdict(state, 'A', 3)).toEqual({ decision: 'continue' });
    expect(ashaVerdict(state, 'F', 3)).toEqual({ decision: 'pending', rung: 1, step: 3 });
    expect(ashaVerdict(state, 'F', 1)).toEqual({ decision: 'continue' });
    expect(ashaVerdict(state, 'A', 8)).toEqual({ decision: 'continue' });
    expect(ashaVerdict(state, 'A', 9)).toEqual({ decision: 'pending', rung: 2, step: 9 });
    expect(ashaVerdict(emptyAshaState(MIN), 'Z', 1)).toEqual({ decision: 'pending', rung: 0, step: 1 });
  });
  it('is stop, with the rung and its cut-off, for a trial stopped at that rung or below', () => {
    expect(ashaVerdict(state, 'B', 1)).toEqual({ decision: 'stop', rung: 0, step: 1, value: 0.7, cutoff: 0.5 });
    expect(ashaVerdict(state, 'C', 3)).toEqual({ decision: 'stop', rung: 1, step: 3, value: 0.35, cutoff: 0.3 });
    expect(ashaVerdict(state, 'C', 2)).toEqual({ decision: 'continue' });
  });
  it('is continue before the first rung and at the last (max_steps stops nothing)', () => {
    expect(ashaVerdict(state, 'Z', 0)).toEqual({ decision: 'continue' });
    expect(ashaVerdict(run(MIN, [['A', 1, 0.5], ['A', 3, 0.5], ['A', 9, 0.5]]).state, 'A', 27)).toEqual({ decision: 'continue' });
  });
});

describe('the promotion view and the best trial', () => {
  it('lists a rung\'s top trials, best first, ties to the earlier', () => {
    const { state } = run(MIN, RUNG0);
    // n=9 keep 3: C .4, I .41, then F and G tie at .42: F was recorded first.
    expect(ashaTopTrials(state, 0, MIN)).toEqual(['C', 'I', 'F']);
    expect(ashaTopTrials(state, 1, MIN)).toEqual([]);
  });

  it('promotes from the highest rung with a top trial not yet above it (Li et al.\'s get_job)', () => {
    let { state } = run(MIN, RUNG0);
    expect(ashaNextPromotion(state, MIN)).toEqual({ trial: 'C', rung: 1 });
    state = ashaReport(state, { trial: 'C', step: 3, value: 0.3 }, MIN).state;
    // Rung 1 holds C alone, its top: C goes to rung 2 before I leaves rung 0.
    expect(ashaNextPromotion(state, MIN)).toEqual({ trial: 'C', rung: 2 });
    state = ashaReport(state, { trial: 'C', step: 9, value: 0.2 }, MIN).state;
    state = ashaReport(state, { trial: 'C', step: 27, value: 0.1 }, MIN).state;
    expect(ashaNextPromotion(state, MIN)).toEqual({ trial: 'I', rung: 1 });
    expect(ashaBestTrial(state, MIN)).toEqual({ trial: 'C', rung: 3, step: 27, value: 0.1 });
  });

  it('has no best trial before a finite value', () => {
    expect(ashaBestTrial(emptyAshaState(MIN), MIN)).toBeNull();
    expect(ashaBestTrial(run(MIN, [['N', 5, NaN]]).state, MIN)).toBeNull();
  });
});

describe('ASHA (property)', () => {
  const report = fc.record({ trial: fc.constantFrom('t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7'), step: fc.integer({ min: 0, max: 40 }), value: fc.oneof({ weight: 9, arbitrary: fc.double({ min: -10, max: 10, noNaN: true }) }, { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity) }) });

  it('never stops the best trial at a rung, and a report seen twice changes nothing', () => {
    fc.assert(
      fc.property(fc.array(report, { maxLength: 60 }), fc.constantFrom('minimize', 'maximize'), fc.constantFrom(2, 3, 4), (reports, goal, reductionFactor) => {
        const s: AshaSettings = { minSteps: 1, maxSteps: 27, reductionFactor, goal: goal as AshaSettings['goal'] };
        let state = emptyAshaState(s);
        for (const r of reports) {
          const { state: next, decision } = ashaReport(state, r, s);
          if (decision.action === 'stop' && decision.recorded.length > 0) {
            const others = next.rungs[decision.rung].entries.filter((e) => e.trial !== r.trial && Number.isFinite(e.value));
            const better = (a: number, b: number) => (goal === 'minimize' ? a < b : a > b);
            // Stopped: it diverged, or some other trial at that rung did strictly better.
            expect(!Number.isFinite(r.value) || others.some((e) => better(e.value, r.value))).toBe(true);
          }
          expect(ashaReport(next, r, s).state).toEqual(next);
          state = next;
        }
      }),
      { numRuns: 250 },
    );
  });
});
