import { describe, expect, it } from 'vitest';
import { listedValues, scatterAxis } from '../web/src/charts/scatter.ts';

const pts = (params: unknown[]) => params.map((param, trial) => ({ trial, param, value: trial / 10 }));

describe("a sweep's scatter of the metric by a parameter", () => {
  it('puts a numeric parameter on a log axis only when all values are positive and span more than two decades', () => {
    expect(scatterAxis(pts([1e-4, 1, 1e-2])).kind).toBe('log');
    expect(scatterAxis(pts([0.01, 1])).kind, 'exactly two decades').toBe('linear');
    expect(scatterAxis(pts([0, 1e-4, 1])).kind, 'a zero').toBe('linear');
    expect(scatterAxis(pts([-1, 1000])).kind).toBe('linear');
  });

  it('draws numeric points at their values, in ascending x (as uPlot wants), ties in trial order', () => {
    const a = scatterAxis(pts([3, 1, 2, 1]));
    expect(a.points.map((p) => [p.trial, p.x])).toEqual([
      [1, 1],
      [3, 1],
      [2, 2],
      [0, 3],
    ]);
    expect(a.categories).toEqual([]);
  });

  it("spreads a categorical parameter's points by category, in the file's order of values, others after by name", () => {
    const a = scatterAxis(pts(['sgd', 'adam', 'sgd', true, 'rmsprop']), ['adam', 'sgd', 'lamb']);
    expect(a.kind).toBe('category');
    expect(a.categories, "a listed value no trial has is left out; true and rmsprop after, by name").toEqual(['adam', 'sgd', 'rmsprop', 'true']);
    const at = (trial: number) => a.points.find((p) => p.trial === trial)!.x;
    expect(at(1)).toBe(0);
    // Two in 'sgd': either side of its slot, in trial order.
    expect(at(0)).toBeLessThan(1);
    expect(at(2)).toBeGreaterThan(1);
    expect(at(2) - at(0)).toBeLessThanOrEqual(0.5);
    expect(a.points.map((p) => p.label)).toEqual(['adam', 'sgd', 'sgd', 'rmsprop', 'true']);
  });

  it("reads a parameter's listed values from the sweep's file", () => {
    expect(listedValues({ parameters: { opt: { values: ['a', 'b'] }, lr: { min: 0, max: 1 } } }, 'opt')).toEqual(['a', 'b']);
    expect(listedValues({ parameters: { lr: { min: 0, max: 1 } } }, 'lr')).toEqual([]);
    expect(listedValues(null, 'x')).toEqual([]);
  });
});
