import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EVENT_KIND_PATTERN, MAX_BATCH_POINTS, MAX_STEP, METRIC_BODY_LIMIT, METRIC_KEY_PATTERN } from '../domain/metrics.ts';
import * as ts from '../sdk/ts/encode.ts';

/**
 * Issue 42, 3: the wire's limits are written once, in domain/metrics.ts; the SDKs ship alone and
 * keep copies. This fails when a copy differs: the numbers by value, the patterns by what they
 * take (every printable character in each place, and the lengths at the bound), so two
 * spellings of one pattern (`\-` and `-` in a class) agree and two rules never do.
 */
const python = (code: string): unknown =>
  JSON.parse(execFileSync('python3', ['-c', code], { cwd: path.join(import.meta.dirname, '../sdk/python'), encoding: 'utf8' }));

/** Strings that tell patterns apart: each printable ASCII character first, inside and last, and lengths around the bound. */
function probes(maxLen: number): string[] {
  const out: string[] = ['', ' ', 'a'.repeat(maxLen), 'a'.repeat(maxLen + 1), 'é', 'a\n'];
  for (let c = 0x20; c < 0x7f; c++) {
    const ch = String.fromCharCode(c);
    out.push(ch, `${ch}a`, `a${ch}`, `a${ch}b`);
  }
  return out;
}

const verdicts = (re: RegExp, xs: string[]) => xs.map((x) => re.test(x));

describe('the SDKs keep the wire limits of domain/metrics.ts', () => {
  const keys = probes(250);
  const kinds = probes(64);

  it('TypeScript SDK: batch size, the byte budget under the body limit, step, key and event-kind rules', () => {
    expect(ts.MAX_BATCH_POINTS).toBe(MAX_BATCH_POINTS);
    expect(ts.MAX_BATCH_BYTES).toBeLessThanOrEqual(METRIC_BODY_LIMIT);
    expect(ts.MAX_STEP).toBe(MAX_STEP);
    expect(verdicts(ts.KEY_RE, keys)).toEqual(verdicts(METRIC_KEY_PATTERN, keys));
    expect(verdicts(ts.KIND_RE, kinds)).toEqual(verdicts(EVENT_KIND_PATTERN, kinds));
  });

  it('Python SDK: the same', () => {
    const got = python(`
import json
from gpuplane import _config, _encode, _run
enc = _encode.Encoder(_config.MAX_BATCH_POINTS, _config.MAX_BATCH_BYTES, lambda: "k", lambda m: None)
keys, kinds = json.loads(${JSON.stringify(JSON.stringify([keys, kinds]))})
print(json.dumps({
  "points": _config.MAX_BATCH_POINTS, "bytes": _config.MAX_BATCH_BYTES, "step": _encode.MAX_STEP,
  "keys": [enc._key_json(k) is not None for k in keys], "kinds": [bool(_run.KIND_RE.fullmatch(k)) for k in kinds],
}))`) as { points: number; bytes: number; step: number; keys: boolean[]; kinds: boolean[] };
    expect(got.points).toBe(MAX_BATCH_POINTS);
    expect(got.bytes).toBeLessThanOrEqual(METRIC_BODY_LIMIT);
    expect(got.step).toBe(MAX_STEP);
    expect(got.keys).toEqual(verdicts(METRIC_KEY_PATTERN, keys));
    expect(got.kinds).toEqual(verdicts(EVENT_KIND_PATTERN, kinds));
  });
});
