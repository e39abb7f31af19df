/** The charts' y axis over real runs (web/src/charts/y-scale.ts): the outlier rule and the points no segment draws. */
import { describe, expect, it } from 'vitest';
import { finiteValues, isolatedPoints, rangeOf, robustExtent } from '../web/src/charts/y-scale.ts';

const healthy = Array.from({ length: 60 }, (_, s) => 2.5 * Math.exp(-s * 0.05) + 0.3);

describe('y scale', () => {
  it('leaves a divergence to ±1e5 out of the range, keeps every healthy value in, and takes it all when told to', () => {
    const values = [...healthy, ...healthy.map((v) => v * 0.9), 10, 100, 1000, -1e5, 1e4, 1e5];
    expect(robustExtent(values, true)).toEqual([Math.min(...healthy) * 0.9, Math.max(...healthy)]);
    expect(robustExtent(values, false)).toEqual([-1e5, 1e5]);
    // A nearly flat series keeps its wiggles; too few values to judge: all of them.
    expect(robustExtent([12.5, 12.5, 12.5, 12.5, 12.5, 12.5, 12.5, 12.5, 12.5, 12.5, 13, 12], true)).toEqual([12, 13]);
    expect(robustExtent([1, 1e6], true)).toEqual([1, 1e6]);
    expect(robustExtent([], true)).toBeNull();
  });

  it('pads a linear range 5 %, takes whole decades of the positive values on a log axis, and [0, 1] for nothing', () => {
    expect(rangeOf([0, 10], { ignoreOutliers: false, log: false })).toEqual([-0.5, 10.5]);
    expect(rangeOf([], { ignoreOutliers: true, log: false })).toEqual([0, 1]);
    expect(rangeOf(finiteValues([[0.3, -2, 0, 250, null, undefined, Infinity]], 0, 6, true), { ignoreOutliers: false, log: true })).toEqual([0.1, 1000]);
  });

  it("finds the points that no segment draws: a single sample, or one between gaps; another run's step (undefined) is passed over", () => {
    expect(isolatedPoints([5])).toEqual([0]);
    expect(isolatedPoints([1, 2, 3])).toEqual([]);
    expect(isolatedPoints([1, null, 3, undefined, null, 4, undefined, 5])).toEqual([0, 2]);
    expect(isolatedPoints([undefined, 7, undefined])).toEqual([1]);
    expect(isolatedPoints([null, null])).toEqual([]);
  });
});
