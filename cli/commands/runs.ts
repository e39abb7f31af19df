import { Command, InvalidArgumentError, Option } from 'commander';
import sparkly from 'sparkly';
import type { RunDetailJson, RunJson, RunMetricsJson, SeriesJson, SummaryJson } from '../api-types.ts';
import { clientOf, out } from '../client-of.ts';
import { getRun, listRuns, runMetrics } from '../client-runs.ts';
import { fmtMetric as fmt, groupEvaluationRuns, metricNumber as num, renderEvalSparkline, renderEvalTable, renderEvaluatedCheckpoints, type EvalSeriesJson } from '../eval-series.ts';
import { age, keyValues, table } from '../table.ts';
import { codeFromTags, codeLine } from '../../domain/code-snapshot.ts';

/** The code snapshot a run ran (its system tags), in one line; null for none. */
const codeOf = (tags: Record<string, string>) => {
  const c = codeFromTags(tags);
  return c ? codeLine(c) : null;
};

const RUN_STATUSES = ['running', 'finished', 'failed', 'crashed', 'cancelled'];

function intArg(name: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return Number(v);
  };
}
const collect = (v: string, prev: string[] = []) => [...prev, ...v.split(',').filter(Boolean)];
const pairs = (o: Record<string, unknown>) =>
  Object.entries(o)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');

/** What a run of an EVALUATE job evaluates, in a few words. */
const evaluatesLine = (e: NonNullable<RunJson['evaluates']>) => `evaluates ${e.checkpoint_id}${e.step === null ? '' : ` @ step ${e.step}`}`;

/** Runs as a table; a run of an EVALUATE job listed with its training run sits under it, indented. */
export function renderRuns(runs: RunJson[], now = Date.now()): string {
  return table(
    ['ID', 'NAME', 'PROJECT', 'EXPERIMENT', 'SOURCE', 'STATUS', 'JOB', 'AGE'],
    groupEvaluationRuns(runs).map(({ run: r, under }) => [
      under ? `└ ${r.id}` : r.id,
      r.evaluates ? evaluatesLine(r.evaluates) : (r.name ?? ''),
      r.project ?? '',
      r.experiment ?? '',
      r.source,
      r.status,
      r.job_id ? `${r.job_id}#${r.attempt}` : '',
      age(r.created_at, now),
    ]),
    { NAME: 32, PROJECT: 24, EXPERIMENT: 24 },
    'no runs',
  );
}

export function renderSummaries(m: Record<string, SummaryJson>): string {
  return table(
    ['KEY', 'LAST', 'STEP', 'MIN', 'AT', 'MAX', 'AT', 'POINTS', 'NAN'],
    Object.entries(m).map(([k, s]) => [k, fmt(s.last), s.last_step, fmt(s.min), s.min_step ?? '', fmt(s.max), s.max_step ?? '', s.count, s.nan_count || '']),
    {},
    'no metrics',
  );
}

export function renderRun(r: RunDetailJson, attempts: RunJson[]): string {
  const parts = [
    keyValues([
      ['id', r.id],
      ['name', r.name],
      ['status', r.status],
      ['source', r.source],
      ['project', r.project],
      ['experiment', r.experiment],
      ['job', r.job_id ? `${r.job_id} attempt ${r.attempt}` : null],
      ['evaluates', r.evaluates ? `checkpoint ${r.evaluates.checkpoint_id} of run ${r.evaluates.run_id}${r.evaluates.step === null ? '' : ` at step ${r.evaluates.step}`}` : null],
      ['forked from', r.forked_from ? `checkpoint ${r.forked_from.checkpoint_id} of run ${r.forked_from.run_id}${r.forked_from.step === null ? '' : ` at step ${r.forked_from.step}`}` : null],
      ['code', codeOf(r.system_tags)],
      ['params', pairs(r.params)],
      ['tags', pairs(r.tags)],
      ['system tags', pairs(r.system_tags)],
      ['imported from', r.external_key],
      ['started', r.started_at],
      ['ended', r.ended_at],
      ['last seen', r.heartbeat_at],
    ]),
  ];
  if (Object.keys(r.metrics).length) parts.push(renderSummaries(r.metrics));
  if (r.evaluations.length) parts.push(renderEvaluatedCheckpoints(r.evaluations));
  if (attempts.length) parts.push(table(['ATTEMPT', 'RUN', 'STATUS', 'STARTED', 'ENDED'], attempts.map((a) => [a.attempt, a.id, a.status, a.started_at, a.ended_at ?? ''])));
  return parts.join('\n\n');
}

/** One series as a table: raw points, or buckets with min/mean/max. */
export function renderSeriesTable(s: SeriesJson): string {
  if (s.points) return table(['STEP', s.key.toUpperCase()], s.points.map((p) => [p.step, fmt(p.value)]));
  return table(['STEPS', 'MIN', 'MEAN', 'MAX', 'POINTS', 'NAN'], (s.buckets ?? []).map((b) => [`${b.step}-${b.step_end}`, fmt(b.min), fmt(b.mean), fmt(b.max), b.count, b.nan_count || '']));
}

/** One series as a sparkline of its values (bucket means), with its range and last value. */
export function renderSparkline(s: SeriesJson, summary: SummaryJson | undefined): string {
  const values = s.points ? s.points.map((p) => num(p.value)) : (s.buckets ?? []).map((b) => num(b.mean));
  const finite = values.filter(Number.isFinite);
  const line = finite.length ? sparkly(values.map((v) => (Number.isFinite(v) ? v : Number.NaN))) : '(no finite values)';
  const stats = summary ? `last ${fmt(summary.last)} @${summary.last_step}  min ${fmt(summary.min)}  max ${fmt(summary.max)}  ${summary.count} points${summary.nan_count ? `, ${summary.nan_count} NaN` : ''}` : '';
  return `${s.key}  ${line}\n${' '.repeat(s.key.length + 2)}${stats}`;
}

/**
 * A run's series, each evaluated metric right after the training metric it belongs beside
 * (eval/loss @ checkpoints under train/loss); one with no such series listed comes last.
 */
export function renderMetrics(m: RunMetricsJson, spark: boolean): string {
  const evalOf = (s: EvalSeriesJson) => (spark ? renderEvalSparkline(s) : renderEvalTable(s));
  const keys = new Set(m.series.map((s) => s.key));
  const blocks = m.series.flatMap((s) => [spark ? renderSparkline(s, m.summaries[s.key]) : renderSeriesTable(s), ...m.evaluations.filter((e) => e.train_key === s.key).map(evalOf)]);
  blocks.push(...m.evaluations.filter((e) => !keys.has(e.train_key)).map(evalOf));
  return blocks.join('\n\n');
}

export function registerRunCommands(program: Command): void {
  program
    .command('runs')
    .description('list runs, newest first')
    .option('--project <name>', 'only this project')
    .option('--experiment <name>', 'only this experiment (needs --project)')
    .addOption(new Option('--status <status>', 'only runs with this status').choices(RUN_STATUSES))
    .option('--job <id>', "only this job's runs (one per attempt)")
    .option('--evaluations', 'also list the runs of EVALUATE jobs, each under the training run it evaluates (--job lists them anyway)')
    .option('--limit <n>', 'at most this many (1-1000)', intArg('--limit', 1, 1000), 100)
    .option('--json', 'print JSON')
    .action(async (o: { project?: string; experiment?: string; status?: string; job?: string; evaluations?: boolean; limit: number; json?: boolean }, cmd: Command) => {
      if (o.experiment && !o.project) throw new InvalidArgumentError('--experiment needs --project');
      const c = clientOf(cmd);
      const q = { project: o.project, experiment: o.experiment, status: o.status, job: o.job };
      const hide = !o.evaluations && !o.job;
      const runs = await listRuns(c, { ...q, evaluations: hide ? 'exclude' : undefined, limit: o.limit });
      if (o.json) return out(JSON.stringify(runs, null, 2));
      const hidden = hide && (await listRuns(c, { ...q, evaluations: 'only', limit: 1 })).length > 0;
      out([runs.length ? renderRuns(runs) : 'no runs', ...(hidden ? ['(runs of evaluations are hidden: --evaluations lists each under its training run)'] : [])].join('\n'));
    });

  program
    .command('run')
    .description("a run's params, tags, metric summaries and, for a job's run, the job's attempts")
    .argument('<id>', 'run id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const c = clientOf(cmd);
      const run = await getRun(c, id);
      const attempts = run.job_id ? (await listRuns(c, { job: run.job_id, limit: 1000 })).sort((a, b) => (a.attempt ?? 0) - (b.attempt ?? 0)) : [];
      out(o.json ? JSON.stringify({ ...run, attempts }, null, 2) : renderRun(run, attempts));
    });

  program
    .command('metrics')
    .description("a run's metrics: a sparkline per key in a terminal, a table otherwise")
    .argument('<run>', 'run id')
    .option('--key <key>', 'only this key (repeatable, or comma-separated)', collect)
    .option('--points <n>', 'at most this many points or buckets per key (1-10000)', intArg('--points', 1, 10_000))
    .option('--step-min <step>', 'from this step', intArg('--step-min', 0))
    .option('--step-max <step>', 'up to this step', intArg('--step-max', 0))
    .option('--table', 'print tables even in a terminal')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { key?: string[]; points?: number; stepMin?: number; stepMax?: number; table?: boolean; json?: boolean }, cmd: Command) => {
      const spark = !o.table && !o.json && process.stdout.isTTY;
      // A sparkline is as wide as the terminal; a table shows what was asked, 1000 by default.
      const points = o.points ?? (spark ? Math.max(10, (process.stdout.columns ?? 80) - 4) : undefined);
      const m = await runMetrics(clientOf(cmd), id, { keys: o.key, points, stepMin: o.stepMin, stepMax: o.stepMax });
      if (o.json) return out(JSON.stringify(m, null, 2));
      const missing = (o.key ?? []).filter((k) => !m.summaries[k] && !m.evaluations.some((e) => e.key === k));
      if (missing.length) throw new Error(`run ${id} has no metric ${missing.map((k) => JSON.stringify(k)).join(', ')}`);
      if (m.series.length === 0 && m.evaluations.length === 0) return out(`run ${id} has no metrics yet`);
      out(renderMetrics(m, spark));
    });
}
