/**
 * The points a sweep tries. Trial i's point is a pure function of the spec and i, so the sweep
 * workflow need keep only how many trials it has started: after a restart (or a continue-as-new)
 * trial i gets the same point, and none is drawn twice.
 *
 * Parameters are taken in the order of their names, not of the file: a spec stored as JSON(B)
 * and read back may come with its keys reordered, and the points must not change with it.
 *
 *   grid    the cartesian product, the last name varying fastest, each parameter's values in
 *           the file's order; the first max_trials points when max_trials is below its size.
 *   random  (and asha, which starts trials at random points) each trial draws from a seeded PRNG
 *           of its own (seedFor(seed, i)): the same seed draws the same points, in any order.
 */
import { prng, seedFor } from './prng.ts';
import { isRangeParameter, sweepTrialCount, type ParamValue, type RangeParameter, type SweepParameter, type SweepSpec } from './sweep-spec.ts';

export type SweepPoint = Record<string, ParamValue>;

function sortedNames(parameters: Record<string, SweepParameter>): string[] {
  return Object.keys(parameters).sort();
}

/** The grid's size: the product of the parameters' value counts (every parameter must be `values`). */
export function gridSize(parameters: Record<string, SweepParameter>): number {
  return sortedNames(parameters).reduce((n, name) => n * valuesOf(parameters[name], name).length, 1);
}

/** Point `index` of the grid, in the stable order above (index 0 … gridSize - 1). */
export function gridPoint(parameters: Record<string, SweepParameter>, index: number): SweepPoint {
  const size = gridSize(parameters);
  if (!Number.isInteger(index) || index < 0 || index >= size) throw new RangeError(`grid point ${index} is outside 0…${size - 1}`);
  const names = sortedNames(parameters);
  const point: SweepPoint = {};
  let rest = index;
  for (let k = names.length - 1; k >= 0; k--) {
    const values = valuesOf(parameters[names[k]], names[k]);
    point[names[k]] = values[rest % values.length];
    rest = Math.floor(rest / values.length);
  }
  // Keep the names' order in the point itself, for stable JSON.
  return Object.fromEntries(names.map((n) => [n, point[n]]));
}

/** One draw of `p` from `rand` (a uniform draw in [0, 1)). */
export function sampleParameter(p: SweepParameter, rand: () => number): ParamValue {
  const r = rand();
  if (!isRangeParameter(p)) return p.values[Math.floor(r * p.values.length)];
  return sampleRange(p, r);
}

function sampleRange(p: RangeParameter, r: number): number {
  switch (p.distribution) {
    case 'uniform':
      return clamp(p.min + r * (p.max - p.min), p);
    case 'log_uniform':
      // Uniform in log space: as likely in [1e-4, 1e-3] as in [1e-3, 1e-2].
      return clamp(Math.exp(Math.log(p.min) + r * (Math.log(p.max) - Math.log(p.min))), p);
    case 'int_uniform':
      // Both ends included.
      return Math.min(p.max, p.min + Math.floor(r * (p.max - p.min + 1)));
  }
}

/** Rounding (exp of a log) can land a hair outside [min, max]: a point never does. */
function clamp(x: number, p: RangeParameter): number {
  return Math.min(p.max, Math.max(p.min, x));
}

/** Random point `index` for `seed`: the same seed and index draw the same point. */
export function randomPoint(parameters: Record<string, SweepParameter>, seed: number, index: number): SweepPoint {
  const rand = prng(seedFor(seed, index));
  return Object.fromEntries(sortedNames(parameters).map((name) => [name, sampleParameter(parameters[name], rand)]));
}

/** Trial `index`'s point (0 … sweepTrialCount - 1): the grid's point, or a random one from the spec's seed (0 when unset). */
export function trialPoint(spec: SweepSpec, index: number): SweepPoint {
  const count = sweepTrialCount(spec);
  if (!Number.isInteger(index) || index < 0 || index >= count) throw new RangeError(`trial ${index} is outside the sweep's 0…${count - 1}`);
  return spec.method === 'grid' ? gridPoint(spec.parameters, index) : randomPoint(spec.parameters, spec.seed ?? 0, index);
}

/** Every trial's point, in trial order. */
export function sweepPoints(spec: SweepSpec): SweepPoint[] {
  return Array.from({ length: sweepTrialCount(spec) }, (_, i) => trialPoint(spec, i));
}

function valuesOf(p: SweepParameter, name: string): ParamValue[] {
  if (isRangeParameter(p)) throw new Error(`parameters.${name}: a grid needs values: [...], not min/max`);
  return p.values;
}
