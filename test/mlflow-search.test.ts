import { describe, expect, it } from 'vitest';
import { parseOrderBy, parseSearchFilter, SearchSyntaxError } from '../domain/mlflow-search.ts';

describe("MLflow's run search syntax (domain/mlflow-search.ts)", () => {
  it('parses comparisons of metrics, params, tags and attributes joined by AND, quoted keys too', () => {
    expect(parseSearchFilter("metrics.loss < 0.5 and params.lr = '0.01' AND tags.`my tag` LIKE 'v%' and attributes.status = \"FINISHED\" and metrics.\"val loss\" >= -1e-3")).toEqual([
      { type: 'metric', key: 'loss', op: '<', value: 0.5 },
      { type: 'param', key: 'lr', op: '=', value: '0.01' },
      { type: 'tag', key: 'my tag', op: 'LIKE', value: 'v%' },
      { type: 'attribute', key: 'status', op: '=', value: 'FINISHED' },
      { type: 'metric', key: 'val loss', op: '>=', value: -0.001 },
    ]);
    expect(parseSearchFilter("tags.mlflow.runName != 'x' and run_id IN ('a', 'b') and params.opt IS NOT NULL and created > 5")).toEqual([
      { type: 'tag', key: 'mlflow.runName', op: '!=', value: 'x' },
      { type: 'attribute', key: 'run_id', op: 'IN', value: ['a', 'b'] },
      { type: 'param', key: 'opt', op: 'IS NOT NULL', value: null },
      { type: 'attribute', key: 'start_time', op: '>', value: 5 },
    ]);
    expect(parseSearchFilter('  ')).toEqual([]);
  });

  it('refuses what MLflow refuses, saying what is wrong', () => {
    const bad: [string, RegExp][] = [
      ['metrics.acc >> 1', /expected a number|compares with a number|operator/],
      ["metrics.acc = 'x'", /compares with a number/],
      ['params.lr = 0.01', /quoted string/],
      ["params.lr = '1' or params.lr = '2'", /no OR/],
      ["foo.bar = 'x'", /invalid identifier/],
      ["attributes.color = 'x'", /invalid attribute key "color"/],
      ["metrics.acc LIKE '1%'", /invalid comparator "LIKE"/],
      ["params.lr = '0.01", /unterminated/],
    ];
    for (const [f, re] of bad) expect(() => parseSearchFilter(f), f).toThrow(re);
    expect(() => parseSearchFilter('metrics.a < 1 and')).toThrow(SearchSyntaxError);
  });

  it('parses order_by entries', () => {
    expect(parseOrderBy(['metrics.loss', 'attributes.start_time DESC', 'params.`a b` asc'])).toEqual([
      { type: 'metric', key: 'loss', ascending: true },
      { type: 'attribute', key: 'start_time', ascending: false },
      { type: 'param', key: 'a b', ascending: true },
    ]);
    expect(() => parseOrderBy(['metrics.loss sideways'])).toThrow(/ASC or DESC/);
  });
});
