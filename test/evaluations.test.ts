import { describe, expect, it } from 'vitest';
import { MISSING_METRICS_LINE, metricsToWire, parseEvalStdout, parseMetricsLine } from '../domain/eval-result.ts';

describe("an evaluation's result: the last metrics line of its stdout", () => {
  it('takes the last metrics line; log lines and earlier metrics lines do not count', () => {
    const out = ['loading', '{"metrics": {"eval/loss": 9}, "partial": 0.5}', 'done', '{"metrics": {"eval/loss": 0.25, "eval/accuracy": 0.8}}', ''].join('\n');
    expect(parseEvalStdout(out)).toEqual({ ok: true, metrics: { 'eval/loss': 0.25, 'eval/accuracy': 0.8 } });
    expect(parseEvalStdout('a\r\n  {"metrics": {"x": 1}}  \r\nbye\r\n')).toEqual({ ok: true, metrics: { x: 1 } });
  });

  it('maps "NaN" and "Infinity" strings to numbers, and stores them back as the metrics API does', () => {
    const r = parseEvalStdout('{"metrics": {"a": "NaN", "b": "Infinity", "c": "-Infinity", "d": -1e-3}}');
    expect(r.ok).toBe(true);
    const m = (r as { metrics: Record<string, number> }).metrics;
    expect(m.a).toBeNaN();
    expect(m).toMatchObject({ b: Infinity, c: -Infinity, d: -0.001 });
    expect(metricsToWire(m)).toEqual({ a: 'NaN', b: 'Infinity', c: '-Infinity', d: -0.001 });
  });

  it('says when there is no metrics line', () => {
    expect(parseEvalStdout('')).toEqual({ ok: false, reason: MISSING_METRICS_LINE });
    expect(parseEvalStdout('loss=0.1\n{"other": 1}\n[1,2]')).toEqual({ ok: false, reason: MISSING_METRICS_LINE });
    expect(MISSING_METRICS_LINE).toBe('no {"metrics": {...}} line in stdout');
  });

  it('a malformed last line fails even after a good one: no half result', () => {
    const r = parseEvalStdout('{"metrics": {"eval/loss": 0.3}}\n{"metrics": {"eval/loss": 0.25, "eval/accuracy": ');
    expect(r.ok).toBe(false);
    expect((r as { reason: string }).reason).toMatch(/^malformed metrics line: not JSON/);
  });

  it.each([
    ['{"metrics": [1, 2]}', /"metrics" must be an object/],
    ['{"metrics": null}', /"metrics" must be an object/],
    ['{"metrics": {}}', /"metrics" is empty/],
    ['{"metrics": {"eval/loss": "0.3"}}', /eval\/loss is "0.3", not a number/],
    ['{"metrics": {"eval/loss": true}}', /eval\/loss is true, not a number/],
    ['{"metrics": {"eval/loss": {"v": 1}}}', /not a number/],
    ['{"metrics": {"bad key!": 1}}', /"bad key!" is not a metric name/],
    ['{"metrics": {"": 1}}', /"" is not a metric name/],
  ])('refuses %s', (line, why) => {
    const r = parseMetricsLine(line);
    expect(r.ok).toBe(false);
    expect((r as { reason: string }).reason).toMatch(/^malformed metrics line: /);
    expect((r as { reason: string }).reason).toMatch(why);
  });

  it('skips the first line of a tail cut mid-stream', () => {
    // The cut left the end of a metrics line: it is no line of its own.
    expect(parseEvalStdout('ss": 1}}\nlog', true)).toEqual({ ok: false, reason: MISSING_METRICS_LINE });
    expect(parseEvalStdout('{"metrics": {"x": 1}}\nlog', true)).toEqual({ ok: false, reason: MISSING_METRICS_LINE });
    expect(parseEvalStdout('{"metrics": {"x": 1}}\nlog', false)).toEqual({ ok: true, metrics: { x: 1 } });
  });
});
