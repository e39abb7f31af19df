import { Command, InvalidArgumentError, Option } from 'commander';
import sparkly from 'sparkly';
import type { RunDetailJson, RunJson, SeriesJson, SummaryJson, WireValue as MetricValue } from '../api-types.ts';
import { clientOf, out } from '../client-of.ts';
import { getRun, listRuns, runMetrics } from '../client-runs.ts';
import { age, keyValues, table } from '../table.ts';

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
/** Numbers as people read them: 6 significant digits. */
const fmt = (v: MetricValue | null | undefined) => (v === null || v === undefined ? '' : typeof v === 'string' ? v : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6))));
const num = (v: MetricValue | null): number => (v === null ? Number.NaN : typeof v === 'number' ? v : Number(v === 'NaN' ? Number.NaN : v === 'Infinity' ? Infinity : -Infinity));

export function renderRuns(runs: RunJson[], now = Date.now()): string {
  return table(
    ['ID', 'NAME', 'PROJECT', 'EXPERIMENT', 'SOURCE', 'STATUS', 'JOB', 'AGE'],
    runs.map((r) => [r.id, r.name ?? '', r.project ?? '', r.experiment ?? '', r.source, r.status, r.job_id ? `${r.job_id}#${r.attempt}` : '', age(r.created_at, now)]),
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

export function registerRunCommands(program: Command): void {
  program
    .command('runs')
    .description('list runs, newest first')
    .option('--project <name>', 'only this project')
    .option('--experiment <name>', 'only this experiment (needs --project)')
    .addOption(new Option('--status <status>', 'only runs with this status').choices(RUN_STATUSES))
    .option('--job <id>', "only this job's runs (one per attempt)")
    .option('--limit <n>', 'at most this many (1-1000)', intArg('--limit', 1, 1000), 100)
    .option('--json', 'print JSON')
    .action(async (o: { project?: string; experiment?: string; status?: string; job?: string; limit: number; json?: boolean }, cmd: Command) => {
      if (o.experiment && !o.project) throw new InvalidArgumentError('--experiment needs --project');
      const runs = await listRuns(clientOf(cmd), { project: o.project, experiment: o.experiment, status: o.status, job: o.job, limit: o.limit });
      out(o.json ? JSON.stringify(runs, null, 2) : runs.length ? renderRuns(runs) : 'no runs');
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
      const missing = (o.key ?? []).filter((k) => !m.summaries[k]);
      if (missing.length) throw new Error(`run ${id} has no metric ${missing.map((k) => JSON.stringify(k)).join(', ')}`);
      if (m.series.length === 0) return out(`run ${id} has no metrics yet`);
      out(spark ? m.series.map((s) => renderSparkline(s, m.summaries[s.key])).join('\n\n') : m.series.map(renderSeriesTable).join('\n\n'));
    });
}
