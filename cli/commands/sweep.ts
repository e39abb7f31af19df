/** `gpuctl sweep create|show|cancel` and `gpuctl sweeps` (docs/sweeps.md). */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { paramText } from '../../domain/param-text.ts';
import { parseSweepSpec, SweepSpecError, type SweepSpec } from '../../domain/sweep-spec.ts';
import type { SweepDetailJson, SweepJson, WireValue } from '../api-types.ts';
import { cancelSweep, createSweep, getSweep, listSweeps } from '../client-sweeps.ts';
import { clientOf, out } from '../client-of.ts';
import { byteSizeArg, codeFor } from '../client-code.ts';
import { pythonEnvBodyOf } from '../python-env-option.ts';
import { DEFAULT_CODE_LIMIT_BYTES } from '../../domain/code-snapshot.ts';
import { intArg } from '../args.ts';
import { WAIT_EXIT } from './jobs.ts';
import { age, keyValues, table } from '../table.ts';

const num = (v: WireValue) => (typeof v === 'number' ? String(Number(v.toPrecision(6))) : v);
/** A point as `name=value …`, names in order (the database keeps a JSON object's keys in an order of its own). */
const params = (p: Record<string, unknown>) =>
  Object.entries(p)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${paramText(v)}`)
    .join(' ');

/**
 * Reads a sweep file (YAML, or JSON by its .json name) and checks it as the API will, so a
 * mistake is named with its field before anything is sent. A relative workdir is taken from
 * the file's folder; none: the folder gpuctl runs in, as `gpuctl submit` takes it.
 */
export async function readSweepFile(file: string): Promise<SweepSpec> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  try {
    const parsed = parseSweepSpec(text, file.endsWith('.json') ? 'json' : 'yaml', parseYaml);
    const codeDir = typeof parsed.code === 'string' ? path.resolve(path.dirname(file), parsed.code) : undefined;
    // python_env: a file's path, relative to the code folder where it is there, else to the file; sent as the files' text.
    const spec = typeof parsed.python_env === 'string' ? { ...parsed, python_env: pythonEnvIn(parsed.python_env, codeDir, path.dirname(file)) } : parsed;
    // code: a folder beside the file, snapshotted and uploaded by `sweep create`; the trials run in its copy, not in a workdir.
    if (typeof spec.code === 'string') return { ...spec, code: path.resolve(path.dirname(file), spec.code) };
    return { ...spec, workdir: spec.workdir ? path.resolve(path.dirname(file), spec.workdir) : process.cwd() };
  } catch (err) {
    if (err instanceof SweepSpecError) throw new Error(`${file}: ${err.message}`);
    throw err;
  }
}

/** A sweep file's python_env path as the files' text, or its one line as a field's mistake. */
function pythonEnvIn(shown: string, codeDir: string | undefined, base: string) {
  try {
    return pythonEnvBodyOf(shown, codeDir, base);
  } catch (err) {
    throw new SweepSpecError('python_env', (err as Error).message);
  }
}

/** One line of a sweep's progress: trials started, running and ended, and the best so far. */
export function progressLine(s: SweepDetailJson): string {
  const b = s.best;
  return `trials: ${s.trials.started}/${s.trials.total} started, ${s.trials.running} running, ${s.trials.ended} ended; best ${b ? `${num(b.value)} (trial ${b.trial})` : 'none yet'}`;
}

/** The sweeps as a table. */
export function renderSweeps(sweeps: SweepJson[], now = Date.now()): string {
  return table(
    ['ID', 'STATE', 'METHOD', 'METRIC', 'TRIALS', 'RUNNING', 'ENDED', 'PROJECT', 'AGE'],
    sweeps.map((s) => [s.id, s.state, s.method, `${s.metric.name} (${s.metric.goal})`, `${s.trials.started}/${s.trials.total}`, s.trials.running, s.trials.ended, [s.project, s.experiment].filter(Boolean).join('/') || '-', age(s.created_at, now)]),
    {},
    'no sweeps',
  );
}

/** A sweep: what it is, how far it got, its best trial, and the leaderboard. */
export function renderSweep(s: SweepDetailJson): string {
  const b = s.best;
  const lines = [
    keyValues([
      ['sweep', s.id],
      ['state', s.reason ? `${s.state} (${s.reason})` : s.state],
      ['method', `${s.method}, seed ${s.seed}${s.rungs.length ? `, rungs at steps ${s.rungs.join(', ')}` : ''}`],
      ['metric', `${s.metric.name} (${s.metric.goal})`],
      ['trials', `${s.trials.started} of ${s.trials.total} started, ${s.trials.running} running, ${s.trials.ended} ended`],
      ['best', b ? `trial ${b.trial} (job ${b.job_id}): ${num(b.value)}${b.step === null ? '' : ` at step ${b.step}`}${b.checkpoint_id ? `, checkpoint ${b.checkpoint_id}${b.fallback ? ' (training-time value)' : ''}` : ''}` : 'none yet'],
    ]),
    '',
    table(
      ['TRIAL', 'JOB', 'STATE', 'BEST', 'STEP', ...(s.rungs.length ? ['RUNG'] : []), 'PARAMS', 'REASON'],
      s.leaderboard.map((t) => [t.trial, t.job_id, t.state, t.best ? num(t.best.value) : '-', t.best?.step ?? '-', ...(s.rungs.length ? [t.rung === null ? '-' : `${t.rung} (${t.rung_step})`] : []), params(t.params), t.reason ?? '']),
      { PARAMS: 60, REASON: 70 },
      'no trials yet',
    ),
  ];
  return lines.join('\n');
}

export function registerSweepCommands(program: Command): void {
  const sweep = program.command('sweep').description('hyperparameter sweeps: grid, random or ASHA search, each trial a TRAIN job (docs/sweeps.md)');
  sweep
    .command('create')
    .description('create a sweep from a YAML or JSON file; prints the sweep id on the last line')
    .argument('<file>', 'the sweep file (docs/sweeps.md)')
    .addOption(new Option('--code-limit <size>', "refuse a snapshot of the file's code: folder larger than this (bytes, or 500K, 50M, 1G)").argParser(byteSizeArg('--code-limit')).default(DEFAULT_CODE_LIMIT_BYTES, `${DEFAULT_CODE_LIMIT_BYTES / 1024 / 1024}M`))
    .option('--json', 'print the sweep as JSON')
    .action(async (file: string, o: { json?: boolean; codeLimit: number }, cmd: Command) => {
      const client = clientOf(cmd);
      const spec = await readSweepFile(file);
      // Every trial runs one snapshot: uploaded once, before the sweep is made.
      if (typeof spec.code === 'string') spec.code = await codeFor(client, spec.code, { project: spec.project, limit: o.codeLimit, say: (l) => process.stderr.write(`${l}\n`) });
      const s = await createSweep(client, spec);
      if (o.json) return out(JSON.stringify(s, null, 2));
      out(`sweep of ${s.trials.total} trial${s.trials.total === 1 ? '' : 's'} (${s.method}, ${s.metric.name} ${s.metric.goal}, seed ${s.seed}); follow it with: gpuctl sweep show ${s.id}`);
      out(s.id);
    });
  sweep
    .command('show')
    .description('a sweep: its state, its best trial (with the best checkpoint) and the leaderboard of trials')
    .argument('<id>', 'sweep id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const s = await getSweep(clientOf(cmd), id);
      out(o.json ? JSON.stringify(s, null, 2) : renderSweep(s));
    });
  sweep
    .command('wait')
    .description(`block until the sweep ends, printing a line as its trials move on; exit ${WAIT_EXIT.SUCCEEDED} SUCCEEDED, ${WAIT_EXIT.CANCELLED} CANCELLED, ${WAIT_EXIT.TIMEOUT} timed out`)
    .argument('<id>', 'sweep id')
    .option('--timeout <s>', 'give up after S seconds', intArg('--timeout', 1))
    .option('--json', 'print the final sweep as JSON')
    .action(async (id: string, o: { timeout?: number; json?: boolean }, cmd: Command) => {
      const client = clientOf(cmd);
      const deadline = Date.now() + (o.timeout ? o.timeout * 1000 : 365 * 24 * 3600 * 1000);
      let last = '';
      for (;;) {
        const s = await getSweep(client, id);
        const line = progressLine(s);
        if (line !== last && !o.json) out(line);
        last = line;
        if (s.state !== 'RUNNING') {
          out(o.json ? JSON.stringify(s, null, 2) : `${s.id} ${s.state}${s.reason ? `: ${s.reason}` : ''}`);
          process.exit(s.state === 'SUCCEEDED' ? WAIT_EXIT.SUCCEEDED : WAIT_EXIT.CANCELLED);
        }
        if (Date.now() > deadline) {
          process.stderr.write(`gpuctl: sweep ${id} still RUNNING after ${o.timeout} s\n`);
          process.exit(WAIT_EXIT.TIMEOUT);
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    });
  sweep
    .command('cancel')
    .description('cancel a sweep: its trials that have not ended are cancelled, and no more start')
    .argument('<id>', 'sweep id')
    .option('--reason <text>', 'why (recorded on the sweep)')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { reason?: string; json?: boolean }, cmd: Command) => {
      const s = await cancelSweep(clientOf(cmd), id, o.reason);
      out(o.json ? JSON.stringify(s) : `cancelling sweep ${s.id}: ${s.trials.started - s.trials.ended} trial(s) not ended are being cancelled`);
    });
  // `gpuctl sweep list` is what people type after `gpuctl sweep create`: the same as `gpuctl sweeps`.
  for (const [parent, name] of [[program, 'sweeps'], [sweep, 'list']] as const) {
    parent
      .command(name)
      .description(name === 'list' ? 'the same as gpuctl sweeps: sweeps, newest first' : 'sweeps, newest first')
      .option('--project <name>', "only this project's")
      .option('--json', 'print JSON')
      .action(async (o: { project?: string; json?: boolean }, cmd: Command) => {
        const sweeps = await listSweeps(clientOf(cmd), o.project);
        out(o.json ? JSON.stringify(sweeps) : renderSweeps(sweeps));
      });
  }
}
