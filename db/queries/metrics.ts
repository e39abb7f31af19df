import os from 'node:os';
import { sql } from 'drizzle-orm';
import { numArray, queryRows, textArray, type Executor } from '../client.ts';
import { rollupsOf, summaryOf, type Bucket, type KeySeries, type SummaryDelta } from '../../domain/metrics.ts';

/**
 * PostgreSQL array literals built here rather than by a driver: one string parameter per
 * array whatever its length, and the same on `pg` and PGlite. `String(NaN)` is "NaN" and
 * `String(-Infinity)` is "-Infinity", which is what float8 reads.
 */
const f64 = (a: readonly number[]) => Buffer.from(Float64Array.from(a).buffer);
if (os.endianness() !== 'LE') throw new Error('metric chunks are stored little-endian; this platform is not');
const nullableNumArray = (a: readonly (number | null)[]) => `{${a.map((v) => (v === null ? 'NULL' : String(v))).join(',')}}`;

const EMPTY = Buffer.alloc(0);

/** The fixed stride of steps that go strictly up by one (a lone step has stride 1), or null. */
function strideOf(steps: readonly number[]): number | null {
  if (steps.length === 1) return 1;
  const d = steps[1] - steps[0];
  if (d <= 0) return null;
  for (let i = 2; i < steps.length; i++) if (steps[i] - steps[i - 1] !== d) return null;
  return d;
}

/** claimBatch claims a batch's Idempotency-Key for a run; false when that batch was stored before. */
export async function claimBatch(ex: Executor, runId: string, batchId: string, points: number): Promise<boolean> {
  const r = await queryRows<{ batch_id: string }>(
    ex,
    sql`insert into metric_batches (run_id, batch_id, points) values (${runId}, ${batchId}, ${points}) on conflict do nothing returning batch_id`,
  );
  return r.length > 0;
}

/** Whether batch `batchId` of the run was stored already (a replayed Idempotency-Key), without claiming it. */
export async function batchClaimed(ex: Executor, runId: string, batchId: string): Promise<boolean> {
  const r = await queryRows<{ n: number }>(ex, sql`select 1 as n from metric_batches where run_id = ${runId} and batch_id = ${batchId}`);
  return r.length > 0;
}

/** writeSeries stores one batch: a raw chunk per key, the rollup buckets and the summaries it changes. */
/**
 * A bucket's sum plus a batch's: past float8's range it is ±Infinity, as in JavaScript, where
 * PostgreSQL's + would refuse the write ("value out of range: overflow"). a/2 + b/2 never
 * overflows, and a + b does exactly when it is past half the largest float8.
 */
const ROLLUP_SUM = sql.raw(`case when abs(metric_rollups.sum / 2 + excluded.sum / 2) > 8.988465674311579e307 and metric_rollups.sum / 2 + excluded.sum / 2 <> 'NaN'::float8
      then sign(metric_rollups.sum / 2 + excluded.sum / 2) * 'Infinity'::float8 else metric_rollups.sum + excluded.sum end`);

export async function writeSeries(ex: Executor, runId: string, series: readonly KeySeries[]): Promise<void> {
  const chunkRows = series.map((s) => {
    let lo = s.steps[0];
    let hi = s.steps[0];
    for (const st of s.steps) {
      if (st < lo) lo = st;
      if (st > hi) hi = st;
    }
    const stride = strideOf(s.steps);
    const times = s.times.every((t) => t === s.times[0]) ? [s.times[0]] : s.times;
    return sql`(${runId}, ${s.key}, ${lo}, ${hi}, ${s.steps.length}, ${stride}, ${stride === null ? f64(s.steps) : EMPTY}, ${f64(s.values)}, ${f64(times)})`;
  });
  await ex.execute(sql`insert into metric_chunks (run_id, key, step_min, step_max, count, stride, steps, values, times) values ${sql.join(chunkRows, sql`, `)}`);

  // Sorted, so two batches of one run take the bucket rows' locks in the same order.
  const r = series.flatMap(rollupsOf).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.width - b.width || a.bucket - b.bucket));
  await ex.execute(sql`
    insert into metric_rollups (run_id, key, width, bucket, count, nan_count, min, max, sum)
    select ${runId}, * from unnest(${textArray(r.map((x) => x.key))}::text[], ${numArray(r.map((x) => x.width))}::int[],
      ${numArray(r.map((x) => x.bucket))}::int8[], ${numArray(r.map((x) => x.count))}::int[], ${numArray(r.map((x) => x.nanCount))}::int[],
      ${nullableNumArray(r.map((x) => x.min))}::float8[], ${nullableNumArray(r.map((x) => x.max))}::float8[], ${numArray(r.map((x) => x.sum))}::float8[])
    on conflict (run_id, key, width, bucket) do update set
      count = metric_rollups.count + excluded.count,
      nan_count = metric_rollups.nan_count + excluded.nan_count,
      min = least(metric_rollups.min, excluded.min),
      max = greatest(metric_rollups.max, excluded.max),
      sum = ${ROLLUP_SUM}`);

  const d = series.map(summaryOf).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  // least/greatest skip NULLs; a min/max step moves only with a strictly better value.
  await ex.execute(sql`
    insert into metric_summaries (run_id, key, count, nan_count, first_step, last_step, last, min, min_step, max, max_step)
    select ${runId}, * from unnest(${textArray(d.map((x) => x.key))}::text[], ${numArray(d.map((x) => x.count))}::int8[],
      ${numArray(d.map((x) => x.nanCount))}::int8[], ${numArray(d.map((x) => x.firstStep))}::int8[], ${numArray(d.map((x) => x.lastStep))}::int8[],
      ${numArray(d.map((x) => x.last))}::float8[], ${nullableNumArray(d.map((x) => x.min))}::float8[], ${nullableNumArray(d.map((x) => x.minStep))}::int8[],
      ${nullableNumArray(d.map((x) => x.max))}::float8[], ${nullableNumArray(d.map((x) => x.maxStep))}::int8[])
    on conflict (run_id, key) do update set
      count = metric_summaries.count + excluded.count,
      nan_count = metric_summaries.nan_count + excluded.nan_count,
      first_step = least(metric_summaries.first_step, excluded.first_step),
      last = case when excluded.last_step >= metric_summaries.last_step then excluded.last else metric_summaries.last end,
      last_step = greatest(metric_summaries.last_step, excluded.last_step),
      min_step = case when metric_summaries.min is null or excluded.min < metric_summaries.min then excluded.min_step else metric_summaries.min_step end,
      min = least(metric_summaries.min, excluded.min),
      max_step = case when metric_summaries.max is null or excluded.max > metric_summaries.max then excluded.max_step else metric_summaries.max_step end,
      max = greatest(metric_summaries.max, excluded.max)`);
}

/** A stored summary has the fields of what one batch adds to it. */
export type SummaryRow = SummaryDelta;

/** Numbers come back as strings from int8 and as "NaN" text from some drivers: read them as numbers. */
const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : num(v));

/** nonFiniteLastKeys returns the keys whose last value is NaN or ±Inf, in the run of a job's attempt: what a failure hint looks for. */
export async function nonFiniteLastKeys(ex: Executor, jobId: string, attempt: number): Promise<string[]> {
  const r = await queryRows<{ key: string }>(
    ex,
    sql`select s.key from metric_summaries s join runs r on r.id = s.run_id
        where r.job_id = ${jobId} and r.attempt = ${attempt} and (s.last = 'NaN'::float8 or s.last in ('Infinity'::float8, '-Infinity'::float8))
        order by s.key`,
  );
  return r.map((x) => x.key);
}

/** summaries returns a run's per-key summaries (of `keys` only, when given), by key. */
export async function summaries(ex: Executor, runId: string, keys?: readonly string[]): Promise<SummaryRow[]> {
  const filter = keys && keys.length > 0 ? sql` and key = any(${textArray(keys)}::text[])` : sql``;
  const r = await queryRows<Record<string, unknown>>(
    ex,
    sql`select key, count, nan_count, first_step, last_step, last, min, min_step, max, max_step from metric_summaries where run_id = ${runId}${filter} order by key`,
  );
  return r.map(summaryRowOf);
}

/** One key's summary in each of these runs (those that logged it), by run id: a sweep's leaderboard reads all its trials' at once. */
export async function summariesOfRuns(ex: Executor, runIds: readonly string[], key: string): Promise<Map<string, SummaryRow>> {
  if (runIds.length === 0) return new Map();
  const r = await queryRows<Record<string, unknown>>(
    ex,
    sql`select run_id, key, count, nan_count, first_step, last_step, last, min, min_step, max, max_step from metric_summaries where run_id = any(${textArray(runIds)}::text[]) and key = ${key}`,
  );
  return new Map(r.map((x) => [x.run_id as string, summaryRowOf(x)]));
}

function summaryRowOf(x: Record<string, unknown>): SummaryRow {
  return {
    key: x.key as string,
    count: num(x.count),
    nanCount: num(x.nan_count),
    firstStep: num(x.first_step),
    lastStep: num(x.last_step),
    last: num(x.last),
    min: numOrNull(x.min),
    minStep: numOrNull(x.min_step),
    max: numOrNull(x.max),
    maxStep: numOrNull(x.max_step),
  };
}

/** A stored float64 array: a Buffer from `pg`, a Uint8Array from PGlite; copied, as neither is 8-byte aligned for sure. */
function numbersOf(v: unknown): Float64Array {
  const bytes = v as Uint8Array;
  return new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** rawPoints returns the raw points of one key with steps in [lo, hi], in step order (a step logged twice keeps both). */
export async function rawPoints(ex: Executor, runId: string, key: string, lo: number, hi: number): Promise<{ steps: number[]; values: number[]; times: number[] }> {
  const r = await queryRows<{ step_min: unknown; count: number; stride: unknown; steps: unknown; values: unknown; times: unknown }>(
    ex,
    sql`select step_min, count, stride, steps, values, times from metric_chunks
        where run_id = ${runId} and key = ${key} and step_min <= ${hi} and step_max >= ${lo} order by step_min, id`,
  );
  const out = { steps: [] as number[], values: [] as number[], times: [] as number[] };
  // Chunks mostly arrive in step order already (a run logs forward): then no sort is needed.
  let ordered = true;
  for (const c of r) {
    const values = numbersOf(c.values);
    const times = numbersOf(c.times);
    const stride = numOrNull(c.stride);
    const first = num(c.step_min);
    const steps = stride === null ? numbersOf(c.steps) : null;
    for (let i = 0; i < values.length; i++) {
      const step = steps ? steps[i] : first + i * stride!;
      if (step < lo || step > hi) continue;
      if (out.steps.length > 0 && step < out.steps[out.steps.length - 1]) ordered = false;
      out.steps.push(step);
      out.values.push(values[i]);
      out.times.push(times.length === 1 ? times[0] : times[i]);
    }
  }
  if (ordered) return out;
  // By step, and in the order read where a step repeats (a stable sort of the indices).
  const idx = out.steps.map((_, i) => i).sort((a, b) => out.steps[a] - out.steps[b] || a - b);
  return { steps: idx.map((i) => out.steps[i]), values: idx.map((i) => out.values[i]), times: idx.map((i) => out.times[i]) };
}

/** rollupBuckets returns the stored rollup buckets of one key at `width`, covering steps [lo, hi]. */
export async function rollupBuckets(ex: Executor, runId: string, key: string, width: number, lo: number, hi: number): Promise<Bucket[]> {
  const r = await queryRows<Record<string, unknown>>(
    ex,
    sql`select bucket, count, nan_count, min::text as min, max::text as max, sum::text as sum from metric_rollups
        where run_id = ${runId} and key = ${key} and width = ${width} and bucket between ${Math.floor(lo / width)} and ${Math.floor(hi / width)}
        order by bucket`,
  );
  return r.map((x) => {
    const b = num(x.bucket);
    return { step: b * width, stepEnd: b * width + width - 1, count: num(x.count), nanCount: num(x.nan_count), min: numOrNull(x.min), max: numOrNull(x.max), sum: num(x.sum) };
  });
}
