/**
 * ASHA against the equivalent grid, simulated: a scripted objective (loss as a known function of
 * lr and step), trials at the points an asha sweep draws (domain/sweep-search.ts), run by
 * max_concurrent workers at one step a tick, each logging its loss every 10 steps. A stopped or
 * finished trial frees its worker for the next one at once. The equivalent grid runs the same
 * trials to max_steps.
 */
import { describe, expect, it } from 'vitest';
import { ashaBestTrial, ashaReport, ashaSettings, emptyAshaState, type AshaSettings } from '../domain/asha.ts';
import { sweepPoints } from '../domain/sweep-search.ts';
import { validateSweepSpec } from '../domain/sweep-spec.ts';

const BEST_LR = 1e-2;
const LOG_EVERY = 10;

/**
 * The objective: a floor set by how far lr is from 1e-2 (in decades), plus a term that falls with
 * the steps, faster for a larger lr, so early values flatter a too-large lr a little.
 */
function loss(lr: number, step: number): number {
  return 0.5 * (Math.log10(lr) - Math.log10(BEST_LR)) ** 2 + 1 / (1 + 10 * lr) / Math.sqrt(step);
}

interface SimResult {
  stepsUsed: number;
  bestTrial: number;
  stoppedAtFirstRung: number;
  completed: number;
}

function simulate(seed: number): { result: SimResult; lrs: number[]; settings: AshaSettings } {
  const spec = validateSweepSpec({
    command: 'python train.py',
    method: 'asha',
    max_trials: 81,
    max_concurrent: 8,
    seed,
    metric: { name: 'train/loss', goal: 'minimize' },
    parameters: { lr: { min: 1e-4, max: 1, distribution: 'log_uniform' } },
    asha: { min_steps: 10, max_steps: 810, reduction_factor: 3 },
  });
  const lrs = sweepPoints(spec).map((p) => p.lr as number);
  const settings: AshaSettings = ashaSettings(spec);
  expect(settings).toEqual({ minSteps: 10, maxSteps: 810, reductionFactor: 3, goal: 'minimize' });
  let state = emptyAshaState(settings);
  // Each worker: the trial it runs and the step it is at.
  const workers: { trial: number; step: number }[] = [];
  let next = 0;
  let stepsUsed = 0;
  let stoppedAtFirstRung = 0;
  let completed = 0;
  while (next < lrs.length && workers.length < spec.max_concurrent!) workers.push({ trial: next++, step: 0 });
  while (workers.length > 0) {
    // One tick: every worker trains one step; those at a logging step report, in trial order.
    for (let w = 0; w < workers.length; ) {
      const job = workers[w];
      job.step++;
      stepsUsed++;
      let done = false;
      if (job.step % LOG_EVERY === 0) {
        const r = ashaReport(state, { trial: String(job.trial), step: job.step, value: loss(lrs[job.trial], job.step) }, settings);
        state = r.state;
        if (r.decision.action === 'stop' && r.decision.rung === 0) stoppedAtFirstRung++;
        if (r.decision.action === 'complete') completed++;
        done = r.decision.action !== 'continue';
      }
      if (done && next < lrs.length) workers[w++] = { trial: next++, step: 0 };
      else if (done) workers.splice(w, 1);
      else w++;
    }
  }
  const best = ashaBestTrial(state, settings)!;
  return { result: { stepsUsed, bestTrial: Number(best.trial), stoppedAtFirstRung, completed }, lrs, settings };
}

describe('ASHA on a scripted objective', () => {
  for (const seed of [1, 2, 3]) {
    it(`finds the best lr of its 81 trials with well under the grid's steps (seed ${seed})`, () => {
      const { result, lrs } = simulate(seed);
      const gridSteps = lrs.length * 810;
      // The equivalent grid's answer: every trial to max_steps, the lowest final loss.
      const oracle = lrs.map((lr, i) => ({ i, final: loss(lr, 810) })).reduce((a, b) => (b.final < a.final ? b : a));
      expect(result.bestTrial).toBe(oracle.i);
      expect(lrs[result.bestTrial]).toBeGreaterThan(BEST_LR / 1.5);
      expect(lrs[result.bestTrial]).toBeLessThan(BEST_LR * 1.5);
      // 7-10 % of the grid's 65,610 steps over seeds 1-5 (4,730 to 6,330).
      expect(result.stepsUsed).toBeLessThan(gridSteps / 8);
      // Most trials go no further than the first rung; a few run to the end.
      expect(result.stoppedAtFirstRung).toBeGreaterThan(lrs.length / 2);
      expect(result.completed).toBeGreaterThanOrEqual(1);
      expect(result.completed).toBeLessThan(lrs.length / 9);
    });
  }
});
