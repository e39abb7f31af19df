/**
 * An evaluation's result: the last `{"metrics": {...}}` line of its process's stdout. Pure, so
 * the rules are tested without a database or a process.
 */
import { METRIC_KEY_PATTERN, METRIC_KEY_RULE, encodeValue, type WireValue } from './metrics.ts';

/** How much of the end of an evaluation's shipped stdout is searched for its metrics line. */
export const EVAL_STDOUT_TAIL_BYTES = 64 * 1024;
/** More metrics than this in one line is not a result but a mistake. */
export const MAX_EVAL_METRICS = 1000;

export const MISSING_METRICS_LINE = 'no {"metrics": {...}} line in stdout';

export type EvalResult = { ok: true; metrics: Record<string, number> } | { ok: false; reason: string };

const NON_FINITE: Record<string, number> = { NaN: Number.NaN, Infinity: Number.POSITIVE_INFINITY, '-Infinity': Number.NEGATIVE_INFINITY };

/** A line that means to be the metrics line: a JSON object naming "metrics" (valid or not). */
function isCandidate(line: string): boolean {
  return line.startsWith('{') && /"metrics"\s*:/.test(line);
}

const clip = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** Checks one candidate line; the metrics, or why the line is no result. */
export function parseMetricsLine(line: string): EvalResult {
  const bad = (why: string): EvalResult => ({ ok: false, reason: `malformed metrics line: ${why}` });
  let doc: unknown;
  try {
    doc = JSON.parse(line);
  } catch (err) {
    return bad(`not JSON (${(err as Error).message}): ${clip(line)}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return bad(`not a JSON object: ${clip(line)}`);
  const m = (doc as Record<string, unknown>).metrics;
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return bad(`"metrics" must be an object of name: number, got ${clip(JSON.stringify(m) ?? 'undefined')}`);
  const entries = Object.entries(m as Record<string, unknown>);
  if (entries.length === 0) return bad('"metrics" is empty');
  if (entries.length > MAX_EVAL_METRICS) return bad(`${entries.length} metrics; at most ${MAX_EVAL_METRICS}`);
  const metrics: Record<string, number> = {};
  for (const [k, v] of entries) {
    if (!METRIC_KEY_PATTERN.test(k)) return bad(`${JSON.stringify(clip(k, 60))} is not a metric name (${METRIC_KEY_RULE})`);
    if (typeof v === 'number' && Number.isFinite(v)) metrics[k] = v;
    else if (typeof v === 'string' && Object.hasOwn(NON_FINITE, v)) metrics[k] = NON_FINITE[v];
    else return bad(`${k} is ${clip(JSON.stringify(v) ?? String(v), 60)}, not a number (or "NaN", "Infinity", "-Infinity")`);
  }
  return { ok: true, metrics };
}

/**
 * The result in an evaluation's stdout: its LAST metrics line decides. A malformed last line
 * fails the evaluation even when an earlier line was good (an earlier line is no final result).
 * `partialStart`: the text is a tail cut at a byte offset, so its first line may be cut too and
 * is skipped.
 */
export function parseEvalStdout(stdout: string, partialStart = false): EvalResult {
  const lines = stdout.split('\n');
  if (partialStart) lines.shift();
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i].trim();
    if (isCandidate(line)) return parseMetricsLine(line);
  }
  return { ok: false, reason: MISSING_METRICS_LINE };
}

/** Metrics as JSON holds them: the non-finite values as the strings the metrics API uses. */
export function metricsToWire(m: Record<string, number>): Record<string, WireValue> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, encodeValue(v)]));
}
