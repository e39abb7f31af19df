import { describe, expect, it } from 'vitest';
import { clippedQuery, clipTo, type RunSeries } from '../web/src/charts/series.ts';
import { treeOf, type LineageNode } from '../web/src/lineage-tree.ts';
import type { LineageRun } from '../web/src/types.ts';

const run = (id: string, depth: number): LineageRun => ({
  id, name: null, project: 'p', experiment: 'e', job_id: null, attempt: null, status: 'finished', depth, forked_from: null, changes: [], checkpoints: [],
});
const shape = (ns: LineageNode[]): unknown[] => ns.map((n) => (n.forks.length ? [n.run.id, shape(n.forks)] : n.run.id));

describe("the console's lineage tree", () => {
  it("nests each run under the last shallower one before it, as the API's depth-first list orders them", () => {
    const runs = [run('a', 0), run('b', 1), run('c', 2), run('d', 1), run('e', 2), run('f', 2)];
    expect(shape(treeOf(runs))).toEqual([['a', [['b', ['c']], ['d', ['e', 'f']]]]]);
    expect(shape(treeOf([]))).toEqual([]);
    expect(shape(treeOf([run('a', 0)]))).toEqual(['a']);
  });
});

describe("a fork's parent on its chart", () => {
  const s: RunSeries = { runId: 'r', width: 1, x: [1, 2, 3, 4, 5], y: [1, null, 3, 4, 5], lo: null, hi: null };
  it('keeps the steps up to the fork step only', () => {
    expect(clipTo(s, 3)).toMatchObject({ x: [1, 2, 3], y: [1, null, 3] });
    expect(clipTo(s, 0)).toMatchObject({ x: [], y: [] });
    expect(clipTo(s, 9)).toBe(s);
    expect(clipTo(s, undefined)).toBe(s);
    expect(clipTo({ ...s, lo: [0, 0, 0, 0, 0], hi: [9, 9, 9, 9, 9] }, 2)).toMatchObject({ lo: [0, 0], hi: [9, 9] });
    expect(clipTo(null, 3)).toBeNull();
  });
  it('asks for no step past it, within the zoomed range where there is one, and for nothing when zoomed past it', () => {
    expect(clippedQuery({ keys: 'k', points: '500' }, 40)).toEqual({ keys: 'k', points: '500', step_max: '40' });
    expect(clippedQuery({ keys: 'k', step_min: '10', step_max: '30' }, 40)).toEqual({ keys: 'k', step_min: '10', step_max: '30' });
    expect(clippedQuery({ keys: 'k', step_min: '10', step_max: '90' }, 40)).toEqual({ keys: 'k', step_min: '10', step_max: '40' });
    expect(clippedQuery({ keys: 'k', step_min: '60', step_max: '90' }, 40)).toEqual({ keys: 'k', step_min: '41', step_max: '40' });
  });
});
