import { Command, InvalidArgumentError } from 'commander';
import type { BestJson, CheckpointDetailJson, ListedCheckpointJson, ResolvedMetricJson, WireValue as MetricValue } from '../api-types.ts';
import { downloadCheckpoint } from './checkpoint-download.ts';
import { clientOf, out } from '../client-of.ts';
import { bestCheckpoint, getCheckpoint, listCheckpoints, type CheckpointScopeQuery } from '../client-checkpoints.ts';
import { keyValues, table } from '../table.ts';
import { registerCheckpoint, renderRegistered } from '../client-registry.ts';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** Bytes as people read them: 512 B, 1.5 KiB, 312 GiB. */
export function humanSize(bytes: number | null): string {
  if (bytes === null) return '-';
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u += 1;
  }
  return u === 0 ? `${v} B` : `${v >= 100 ? Math.round(v) : Number(v.toPrecision(3))} ${UNITS[u]}`;
}

const fmt = (v: MetricValue | null | undefined) => (v === null || v === undefined ? '-' : typeof v === 'string' ? v : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6))));
const when = (iso: string | null) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '-');
const pairs = (m: Record<string, MetricValue> | null) => (m ? Object.entries(m).map(([k, v]) => `${k}=${fmt(v)}`).join(' ') : '');
export const metricLine = (m: ResolvedMetricJson) => `${m.goal === 'min' ? 'minimise' : 'maximise'} ${m.name} (from the ${m.level === 'default' ? 'global default' : m.level})`;

/** The leaderboard's two metric columns, named: the evaluated primary metric and its training-time counterpart at the step. */
export const leaderboardHeads = (m: ResolvedMetricJson) => [`EVAL ${m.name}`, `TRAIN ${m.train_metric}`];

/** The leaderboard: the newest run first, each run by step; the evaluated value beside the training-time one. */
export function renderCheckpoints(list: ListedCheckpointJson[], metric: ResolvedMetricJson): string {
  // The STORED column only where the plane keeps checkpoints in its object store (docs/storage.md).
  const stored = list.some((c) => c.storage !== null);
  const t = table(
    ['ID', 'RUN', 'STEP', ...leaderboardHeads(metric), 'SIZE', ...(stored ? ['STORED'] : []), 'CREATED'],
    list.map((c) => [c.id, c.run_id, c.step ?? '-', fmt(c.eval_value), fmt(c.train_value), c.deleted_at ? 'deleted' : humanSize(c.size_bytes), ...(stored ? [c.storage ?? '-'] : []), when(c.created_at)]),
    {},
    'no checkpoints',
  );
  return `${t}\n\nEVAL: ${metricLine(metric)}; TRAIN: the run's ${metric.train_metric} at the checkpoint's step`;
}

export function renderCheckpoint(c: CheckpointDetailJson): string {
  const parts = [
    keyValues([
      ['id', c.id],
      ['run', c.run_id],
      ['job', c.job_id ? `${c.job_id} attempt ${c.attempt}` : null],
      ['node', c.node_id],
      ['path', c.uri],
      ['fingerprint', c.fingerprint],
      ['size', humanSize(c.size_bytes)],
      ['step', c.step],
      ['train metrics', pairs(c.train_metrics)],
      ['parent', c.parent_checkpoint_id],
      ['created', when(c.created_at)],
      ['deleted', c.deleted_at ? when(c.deleted_at) : null],
      ['stored', storageLine(c)],
    ]),
  ];
  parts.push(
    c.evaluations.length
      ? table(
          ['EVALUATION', 'STATUS', 'JOB', 'METRICS', 'ENDED'],
          c.evaluations.map((e) => [e.id, e.status, e.job_id ?? '', e.status === 'succeeded' ? pairs(e.metrics) : (e.reason ?? ''), when(e.ended_at)]),
          { METRICS: 80 },
        )
      : 'no evaluations',
  );
  if (c.chain.length) parts.push(`resume chain (parent first):\n${table(['CHECKPOINT', 'RUN', 'JOB', 'STEP'], c.chain.map((p) => [p.id, p.run_id, p.job_id ? `${p.job_id}#${p.attempt}` : '', p.step ?? '-']))}`);
  return parts.join('\n\n');
}

/** Where the checkpoint's copy in the plane's store stands; null where the plane keeps none (local). */
function storageLine(c: Pick<CheckpointDetailJson, 'storage' | 'storage_reason' | 'stored_bytes'>): string | null {
  if (c.storage === null) return null;
  if (c.storage === 'failed') return `failed: ${c.storage_reason ?? ''}`;
  return c.storage === 'stored' ? `stored (${humanSize(c.stored_bytes)})` : 'pending (its node is uploading it)';
}

export function renderBest(b: BestJson): string {
  const c = b.checkpoint;
  return keyValues([
    ['best', c.id],
    ['run', c.run_id],
    ['step', c.step],
    ['path', c.uri],
    ['stored', storageLine(c)],
    ['metric', `${b.metric.name} = ${fmt(b.value)}${b.fallback ? ' (fallback: training-time value)' : ''}`],
    ['train', `${b.metric.train_metric} = ${fmt(c.train_value)} at step ${c.step ?? '-'}`],
    ['goal', b.metric.goal === 'min' ? 'minimise' : 'maximise'],
    ['level', b.metric.level === 'default' ? 'global default' : b.metric.level],
    ['ranked', `${b.ranked} checkpoint${b.ranked === 1 ? '' : 's'}`],
  ]);
}

interface ScopeOptions {
  run?: string;
  project?: string;
  experiment?: string;
}

function scopeOf(o: ScopeOptions, required: boolean): CheckpointScopeQuery {
  if (o.run && (o.project || o.experiment)) throw new InvalidArgumentError('give either --run, or --project (and --experiment), not both');
  if (o.experiment && !o.project) throw new InvalidArgumentError('--experiment needs --project');
  if (required && !o.run && !o.project) throw new InvalidArgumentError('give --run R, or --project P (and optionally --experiment E)');
  return { run: o.run, project: o.project, experiment: o.experiment };
}

function intArg(name: string, min: number, max: number) {
  return (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return Number(v);
  };
}

/** `gpuctl checkpoints`, `gpuctl checkpoint ID`, `gpuctl best`. */
export function registerCheckpointCommands(program: Command): void {
  program
    .command('checkpoints')
    .description("a run's, experiment's or project's checkpoints (the newest run first, each run by step), with the primary metric's evaluated value and its training-time counterpart at the step")
    .option('--run <id>', "this run's checkpoints")
    .option('--project <name>', "this project's checkpoints")
    .option('--experiment <name>', "only this experiment's (needs --project)")
    .option('--limit <n>', 'at most this many (1-1000)', intArg('--limit', 1, 1000), 100)
    .option('--json', 'print JSON')
    .action(async (o: ScopeOptions & { limit: number; json?: boolean }, cmd: Command) => {
      const r = await listCheckpoints(clientOf(cmd), { ...scopeOf(o, true), limit: o.limit });
      out(o.json ? JSON.stringify(r, null, 2) : r.checkpoints.length ? renderCheckpoints(r.checkpoints, r.metric) : 'no checkpoints');
    });

  program
    .command('checkpoint')
    .description("a checkpoint: where it is, its evaluations, and its resume chain; `gpuctl checkpoint download ID [DIR]`: a stored checkpoint's files from the plane's store into DIR (default ./ID), checked against its fingerprint")
    .argument('<id>', 'checkpoint id (or download)')
    .argument('[more...]', 'with download: the checkpoint id, and the folder to make (default ./ID)')
    .option('--json', 'print JSON')
    .action(async (id: string, more: string[], o: { json?: boolean }, cmd: Command) => {
      if (id === 'download') {
        if (more.length < 1 || more.length > 2) throw new InvalidArgumentError('gpuctl checkpoint download ID [DIR]');
        return downloadCheckpoint(clientOf(cmd), more[0], more[1], !!o.json);
      }
      if (more.length) throw new InvalidArgumentError(`gpuctl checkpoint ID takes one id (got ${more.length + 1})`);
      const c = await getCheckpoint(clientOf(cmd), id);
      out(o.json ? JSON.stringify(c, null, 2) : renderCheckpoint(c));
    });

  program
    .command('best')
    .description('the best checkpoint by the primary metric: evaluated values first, training-time values only as a fallback')
    .option('--run <id>', "among this run's checkpoints")
    .option('--project <name>', "among this project's checkpoints")
    .option('--experiment <name>', "among this experiment's (needs --project)")
    .option('--register <name>', "register the best as a new version of this model of its project (MLflow's registry), recording the evaluation that made it best")
    .option('--alias <alias>', 'with --register: point this alias (e.g. champion) at the new version')
    .option('--json', 'print JSON')
    .action(async (o: ScopeOptions & { json?: boolean; register?: string; alias?: string }, cmd: Command) => {
      if (o.alias && !o.register) throw new InvalidArgumentError('--alias needs --register NAME');
      const client = clientOf(cmd);
      const b = await bestCheckpoint(client, scopeOf(o, true));
      if (!o.register) return out(o.json ? JSON.stringify(b, null, 2) : renderBest(b));
      const r = await registerCheckpoint(client, b.checkpoint.id, { name: o.register, ...(o.alias ? { alias: o.alias } : {}) });
      out(o.json ? JSON.stringify({ ...b, registered: r }, null, 2) : `${renderBest(b)}\n\n${renderRegistered(r)}`);
    });
}
