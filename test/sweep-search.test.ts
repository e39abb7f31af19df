/** The points a sweep tries (domain/sweep-search.ts): the grid's order, and seeded random draws. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gridPoint, gridSize, randomPoint, sampleParameter, sweepPoints, trialPoint } from '../domain/sweep-search.ts';
import { validateSweepSpec, type RangeParameter, type SweepParameter } from '../domain/sweep-spec.ts';

const grid = validateSweepSpec({
  command: 'python train.py',
  method: 'grid',
  // Written out of name order on purpose: points follow the names' order, not the file's.
  parameters: { opt: { values: ['adam', 'sgd'] }, lr: { values: [0.1, 0.01, 0.001] }, bs: { values: [32, 64] } },
});

describe('grid', () => {
  it('is the full cartesian product, the last name (in name order) varying fastest', () => {
    expect(gridSize(grid.parameters)).toBe(12);
    const points = sweepPoints(grid);
    expect(points).toHaveLength(12);
    expect(points.slice(0, 7)).toEqual([
      { bs: 32, lr: 0.1, opt: 'adam' },
      { bs: 32, lr: 0.1, opt: 'sgd' },
      { bs: 32, lr: 0.01, opt: 'adam' },
      { bs: 32, lr: 0.01, opt: 'sgd' },
      { bs: 32, lr: 0.001, opt: 'adam' },
      { bs: 32, lr: 0.001, opt: 'sgd' },
      { bs: 64, lr: 0.1, opt: 'adam' },
    ]);
    expect(new Set(points.map((p) => JSON.stringify(p))).size).toBe(12);
    expect(Object.keys(points[0])).toEqual(['bs', 'lr', 'opt']);
  });

  it('does not change with the order of the keys in the file (a spec read back from JSONB)', () => {
    const reordered = { ...grid, parameters: { bs: grid.parameters.bs, lr: grid.parameters.lr, opt: grid.parameters.opt } };
    expect(sweepPoints(reordered)).toEqual(sweepPoints(grid));
  });

  it('is capped by max_trials, keeping the first points', () => {
    const capped = sweepPoints({ ...grid, max_trials: 5 });
    expect(capped).toEqual(sweepPoints(grid).slice(0, 5));
  });

  it('computes point i without the others, and refuses one outside the grid', () => {
    expect(gridPoint(grid.parameters, 11)).toEqual({ bs: 64, lr: 0.001, opt: 'sgd' });
    expect(() => gridPoint(grid.parameters, 12)).toThrow('grid point 12 is outside 0…11');
    expect(() => trialPoint({ ...grid, max_trials: 5 }, 5)).toThrow("trial 5 is outside the sweep's 0…4");
  });
});

describe('random', () => {
  const spec = validateSweepSpec({
    command: 'python train.py',
    method: 'random',
    max_trials: 200,
    seed: 42,
    parameters: {
      lr: { min: 1e-5, max: 1e-1, distribution: 'log_uniform' },
      dropout: { min: 0, max: 0.5, distribution: 'uniform' },
      layers: { min: 2, max: 4, distribution: 'int_uniform' },
      opt: { values: ['adam', 'sgd', 'lion'] },
    },
  });

  it('draws the same points for the same seed, in any order, and others for another seed', () => {
    const points = sweepPoints(spec);
    expect(sweepPoints(spec)).toEqual(points);
    expect([150, 3, 77].map((i) => trialPoint(spec, i))).toEqual([points[150], points[3], points[77]]);
    const other = sweepPoints({ ...spec, seed: 43 });
    expect(other.filter((p, i) => p.lr === points[i].lr)).toHaveLength(0);
  });

  it('keeps every draw in its range: int_uniform integers with both ends, values from the list', () => {
    const points = sweepPoints(spec);
    for (const p of points) {
      expect(p.lr).toBeGreaterThanOrEqual(1e-5);
      expect(p.lr).toBeLessThanOrEqual(1e-1);
      expect(p.dropout).toBeGreaterThanOrEqual(0);
      expect(p.dropout).toBeLessThan(0.5);
      expect([2, 3, 4]).toContain(p.layers);
      expect(['adam', 'sgd', 'lion']).toContain(p.opt);
    }
    // Both ends of int_uniform, and every value, come up in 200 draws.
    expect(new Set(points.map((p) => p.layers))).toEqual(new Set([2, 3, 4]));
    expect(new Set(points.map((p) => p.opt))).toEqual(new Set(['adam', 'sgd', 'lion']));
  });

  it('draws log_uniform evenly in log space: about as many per decade', () => {
    const decades = [0, 0, 0, 0];
    for (const p of sweepPoints(spec)) decades[Math.min(3, Math.floor(Math.log10(p.lr as number) + 5))]++;
    // 200 draws, 50 a decade expected; a uniform draw would put ~90 % in the top decade.
    for (const n of decades) expect(n).toBeGreaterThan(25);
  });

  it('maps the edges of a draw to the edges of the range', () => {
    const at = (p: SweepParameter, r: number) => sampleParameter(p, () => r);
    const ints: RangeParameter = { min: -2, max: 2, distribution: 'int_uniform' };
    expect(at(ints, 0)).toBe(-2);
    expect(at(ints, 0.999999)).toBe(2);
    const logs: RangeParameter = { min: 1e-4, max: 1, distribution: 'log_uniform' };
    expect(at(logs, 0)).toBeCloseTo(1e-4, 12);
    expect(at(logs, 0.5)).toBeCloseTo(1e-2, 12);
    expect(at({ values: ['a', 'b'] }, 0.5)).toBe('b');
  });
});

describe('a seeded random sweep (property)', () => {
  const range = fc
    .tuple(fc.double({ min: -1e6, max: 1e6, noNaN: true }), fc.double({ min: 1e-6, max: 1e6, noNaN: true }), fc.constantFrom('uniform', 'log_uniform', 'int_uniform'))
    .map(([a, width, distribution]): RangeParameter => {
      if (distribution === 'int_uniform') return { min: Math.round(a), max: Math.round(a) + Math.max(1, Math.round(width)), distribution };
      if (distribution === 'log_uniform') return { min: Math.abs(a) + 1e-6, max: Math.abs(a) + 1e-6 + width, distribution };
      return { min: a, max: a + width, distribution };
    });

  it('is reproducible from its seed, and every point is in range', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('a', 'b', 'c', 'lr'), range, { minKeys: 1 }), fc.nat({ max: 0xffffffff }), fc.nat({ max: 1000 }), (parameters, seed, index) => {
        const p = randomPoint(parameters, seed, index);
        expect(randomPoint(parameters, seed, index)).toEqual(p);
        for (const [name, r] of Object.entries(parameters) as [string, RangeParameter][]) {
          const x = p[name] as number;
          expect(x).toBeGreaterThanOrEqual(r.min);
          expect(x).toBeLessThanOrEqual(r.max);
          if (r.distribution === 'int_uniform') expect(Number.isInteger(x)).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});
