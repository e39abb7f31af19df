/**
 * bench/sweep: what a sweep finds and what it costs, each figure beside a peer measured in the
 * same run.
 *
 *   node --import tsx bench/sweep.ts [--seeds 1,2,3,4,5 --trials 27 --overhead-runs 10 --big 1000 --skip-asha --skip-overhead --skip-big]
 *
 *  - ASHA against Optuna: an asha sweep of `--trials` trials (4 at a time, rungs at 10, 30 and 90
 *    steps, reduction factor 3) of examples/sweep_objective.py (the loss a known function of lr
 *    and step, 50 ms a step, logged every step through the SDK), once per seed; the best value
 *    found (the loss at 90 steps of the best trial) and the trial-steps used (each trial's last
 *    step logged: a stopped trial's steps after its rung count). Peer: Optuna with its
 *    SuccessiveHalvingPruner on the same objective and budget, in-process (bench/sweep-optuna.py,
 *    the venv of scripts/optuna-venv.sh): on the very points the sweep tried (enqueued in trial
 *    order: only the stopping differs), one at a time and 4 at a time (threads, 50 ms a step, as
 *    the sweep runs them), and on points of its own, RandomSampler and TPESampler.
 *    Aim: the same best value with no more steps. Also what a trial's wait for its verdict at a
 *    rung (the SDK's, docs/sweeps.md) costs one that goes on: the time from its point at the rung
 *    to the next, against a plain step's.
 *  - Overhead per trial: POST /sweeps of one trial → its first step logged, against POST /jobs of
 *    the same script → its first step logged, alternated `--overhead-runs` times. Aim: ≤ +200 ms.
 *  - A `--big`-trial random sweep of trivial trials (`true`, 32 at a time on 32 fake cards): how
 *    long it takes, that every trial is accounted for, and that its workflow's history stays
 *    bounded (the runs it continued as new into, and the longest).
 *
 * Real processes: a throwaway PostgreSQL, a Temporal dev server, `gpuctl control-worker`,
 * `gpuctl api` and `gpuctl agent --fake-gpus` (all on this machine).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { SweepDetailJson } from '../cli/api-types.ts';
import { connectClient } from '../temporal/setup.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { examplesPython } from '../test/support/examples.ts';
import { until } from '../test/support/poll.ts';
import { objectiveSweep } from '../test/support/sweeps.ts';
import { startSharedServices } from '../test/support/services.ts';
import { sweepWorkflowId } from '../workflows/names.ts';

const { values: args } = parseArgs({
  options: {
    seeds: { type: 'string', default: '1,2,3,4,5' },
    trials: { type: 'string', default: '27' },
    'overhead-runs': { type: 'string', default: '10' },
    big: { type: 'string', default: '1000' },
    'skip-asha': { type: 'boolean', default: false },
    'skip-overhead': { type: 'boolean', default: false },
    'skip-big': { type: 'boolean', default: false },
  },
  strict: true,
});
const SEEDS = args.seeds.split(',').map(Number);
const TRIALS = Number(args.trials);
const root = path.resolve(import.meta.dirname, '..');
const say = (s: string) => process.stdout.write(`${s}\n`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const loss = (lr: number, step: number) => 0.5 * (Math.log10(lr) + 2) ** 2 + 1 / (1 + 10 * lr) / Math.sqrt(step);
const fmt = (x: number) => x.toFixed(4);

async function ended(c: Cluster, id: string, timeoutMs: number): Promise<SweepDetailJson> {
  return until(
    `sweep ${id} ended`,
    async () => {
      const s = await c.client.request<SweepDetailJson>('GET', `/sweeps/${id}`);
      return s.state !== 'RUNNING' ? s : null;
    },
    timeoutMs,
    500,
  );
}

const trialEnv = { PYTHONPATH: path.join(root, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.05' };

async function asha(c: Cluster, work: string): Promise<void> {
  const ours: { seed: number; best: number; steps: number; bestPossible: number; stopped: number }[] = [];
  const rungPauses: number[] = [];
  const plainSteps: number[] = [];
  /** Each seed's points in trial order: Optuna tries the very same ones too. */
  const points: Record<number, number[]> = {};
  for (const seed of SEEDS) {
    const made = await c.client.request<SweepDetailJson>('POST', '/sweeps', objectiveSweep({ workdir: work, trials: TRIALS, seed, stepSleepS: 0.05 }));
    const s = await ended(c, made.id, 900_000);
    const failed = s.leaderboard.find((t) => t.state === 'FAILED');
    if (failed) throw new Error(`sweep ${s.id}: trial ${failed.trial} failed: ${failed.reason}`);
    const lrs = s.leaderboard.map((t) => t.params.lr as number);
    points[seed] = [...s.leaderboard].sort((a, b) => a.trial - b.trial).map((t) => t.params.lr as number);
    const best = loss(s.leaderboard[0].params.lr as number, 90);
    const steps = s.leaderboard.reduce((n, t) => n + (t.last?.step ?? 0), 0);
    ours.push({ seed, best, steps, bestPossible: Math.min(...lrs.map((x) => loss(x, 90))), stopped: s.leaderboard.filter((t) => t.stopped).length });
    // What waiting at a rung costs a trial that goes on: the time from its point at a rung's step to the next, against a plain step's.
    for (const t of s.leaderboard) {
      for (const r of s.rungs.slice(0, -1)) {
        if (!t.run_id || (t.last?.step ?? 0) < r + 2) continue;
        const m = await c.client.request<{ series: { key: string; points?: { step: number; ts: number }[] }[] }>('GET', `/runs/${t.run_id}/metrics?keys=train/loss&step_min=${r}&step_max=${r + 2}`);
        const ts = new Map((m.series[0]?.points ?? []).map((p) => [p.step, p.ts]));
        if (ts.size === 3) {
          rungPauses.push(ts.get(r + 1)! - ts.get(r)!);
          plainSteps.push(ts.get(r + 2)! - ts.get(r + 1)!);
        }
      }
    }
    say(`  GPUPlane asha, seed ${seed}: best ${fmt(best)} (best of its points ${fmt(ours.at(-1)!.bestPossible)}), ${steps} trial-steps, ${ours.at(-1)!.stopped} of ${TRIALS} stopped`);
  }
  const python = path.join(execFileSync('bash', [path.join(root, 'scripts/optuna-venv.sh')], { stdio: ['ignore', 'pipe', 'inherit'] }).toString().trim(), 'bin', 'python');
  const pointsFile = path.join(work, 'points.json');
  fs.writeFileSync(pointsFile, JSON.stringify(points));
  const peer = (sampler: string, more: string[] = []) =>
    execFileSync(python, [path.join(root, 'bench/sweep-optuna.py'), '--seeds', SEEDS.join(','), '--trials', String(TRIALS), '--sampler', sampler, '--points', pointsFile, ...more], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { seed: number; best_value: number; steps: number; pruned: number; best_possible: number });
  const same = peer('points');
  // As the sweep runs them: 4 at a time (threads), 50 ms a step.
  const same4 = peer('points', ['--jobs', '4', '--step-sleep', '0.05']);
  const random = peer('random');
  const tpe = peer('tpe');
  for (const r of same) say(`  Optuna SuccessiveHalvingPruner on GPUPlane's points, seed ${r.seed}: best ${fmt(r.best_value)}, ${r.steps} trial-steps, ${r.pruned} pruned`);
  for (const r of same4) say(`  the same, 4 at a time, 50 ms a step, seed ${r.seed}: best ${fmt(r.best_value)}, ${r.steps} trial-steps, ${r.pruned} pruned`);
  for (const r of random) say(`  Optuna SuccessiveHalvingPruner + RandomSampler, seed ${r.seed}: best ${fmt(r.best_value)} (best of its points ${fmt(r.best_possible)}), ${r.steps} trial-steps, ${r.pruned} pruned`);
  for (const r of tpe) say(`  Optuna SuccessiveHalvingPruner + TPESampler, seed ${r.seed}: best ${fmt(r.best_value)}, ${r.steps} trial-steps, ${r.pruned} pruned`);
  const m = (xs: number[]) => fmt(median(xs));
  say(`ASHA, ${TRIALS} trials × ${SEEDS.length} seeds (rungs 10/30/90, rf 3; the grid of the same points: ${TRIALS * 90} trial-steps a seed):`);
  say(`  GPUPlane (4 at a time):   median best ${m(ours.map((o) => o.best))}, median ${median(ours.map((o) => o.steps))} trial-steps; found the best of its points in ${ours.filter((o) => o.best === o.bestPossible).length} of ${ours.length} seeds`);
  say(`  Optuna, the same points (serial): median best ${m(same.map((o) => o.best_value))}, median ${median(same.map((o) => o.steps))} trial-steps; found the best of the points in ${same.filter((o) => o.best_value === o.best_possible).length} of ${same.length} seeds`);
  say(`  Optuna, the same points, 4 at a time (threads, 50 ms a step): median best ${m(same4.map((o) => o.best_value))}, median ${median(same4.map((o) => o.steps))} trial-steps; found the best of the points in ${same4.filter((o) => o.best_value === o.best_possible).length} of ${same4.length} seeds`);
  say(`  Optuna random (serial):   median best ${m(random.map((o) => o.best_value))}, median ${median(random.map((o) => o.steps))} trial-steps; found the best of its points in ${random.filter((o) => o.best_value === o.best_possible).length} of ${random.length} seeds`);
  say(`  Optuna TPE (serial):      median best ${m(tpe.map((o) => o.best_value))}, median ${median(tpe.map((o) => o.steps))} trial-steps`);
  if (rungPauses.length) say(`  a trial that goes on past a rung, from its point at the rung to the next (it waited for the verdict): median ${median(rungPauses)} ms, max ${Math.max(...rungPauses)} (${rungPauses.length} rung passes); a plain step: median ${median(plainSteps)} ms`);
}

/** The time (epoch ms) the script below logged its first step, read from the file it writes. */
const FIRST_STEP = `
import os, time, gpuplane
run = gpuplane.init('bench', 'overhead')
run.log({'x': 1.0}, step=1)
open('first-step-' + os.environ['GPUPLANE_JOB_ID'], 'w').write(str(time.time() * 1000))
run.finish()
`;

async function overhead(c: Cluster, work: string): Promise<void> {
  const script = path.join(work, 'first_step.py');
  fs.writeFileSync(script, FIRST_STEP);
  const command = [examplesPython(), script];
  const firstStep = async (jobId: string) => until(`${jobId}'s first step`, () => {
    const f = path.join(work, `first-step-${jobId}`);
    return fs.existsSync(f) && fs.readFileSync(f, 'utf8') ? Number(fs.readFileSync(f, 'utf8')) : null;
  }, 60_000, 20);
  const plain: number[] = [];
  const sweep: number[] = [];
  const db = new pg.Client({ connectionString: c.dbUrl });
  await db.connect();
  try {
    for (let i = 0; i < Number(args['overhead-runs']); i++) {
      let t0 = Date.now();
      const j = await c.client.submit({ type: 'TRAIN', gpus: 1, working_dir: work, env: trialEnv, command });
      plain.push((await firstStep(j.id)) - t0);
      await c.client.waitFor(j.id, undefined, 60_000);
      t0 = Date.now();
      const s = await c.client.request<SweepDetailJson>('POST', '/sweeps', { command, workdir: work, gpus: 1, env: trialEnv, method: 'grid', parameters: { i: { values: [i] } } });
      const jobId = await until('the trial', async () => (await db.query<{ job_id: string }>('select job_id from sweep_trials where sweep_id = $1', [s.id])).rows[0]?.job_id ?? null, 60_000, 20);
      sweep.push((await firstStep(jobId)) - t0);
      await ended(c, s.id, 60_000);
    }
  } finally {
    await db.end();
  }
  say(`overhead per trial, ${plain.length} runs alternated (request → first step logged, the same Python script):`);
  say(`  sweep of one trial: median ${Math.round(median(sweep))} ms (${Math.round(Math.min(...sweep))}-${Math.round(Math.max(...sweep))}); plain submit: median ${Math.round(median(plain))} ms (${Math.round(Math.min(...plain))}-${Math.round(Math.max(...plain))}); difference of medians ${Math.round(median(sweep) - median(plain))} ms; aim ≤ +200 ms`);
}

async function big(c: Cluster): Promise<void> {
  const n = Number(args.big);
  const t0 = Date.now();
  const made = await c.client.request<SweepDetailJson>('POST', '/sweeps', { command: 'true', gpus: 1, method: 'random', max_trials: n, max_concurrent: 32, seed: 1, parameters: { lr: { min: 1e-4, max: 1, distribution: 'log_uniform' } } });
  let last = 0;
  const s = await until(
    `the ${n}-trial sweep`,
    async () => {
      const x = await c.client.request<SweepDetailJson>('GET', `/sweeps/${made.id}`);
      if (x.trials.ended - last >= n / 10) {
        last = x.trials.ended;
        say(`  ${x.trials.ended}/${n} ended after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      }
      return x.state !== 'RUNNING' ? x : null;
    },
    3_600_000,
    1000,
  );
  const secs = (Date.now() - t0) / 1000;
  const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
  const lengths: number[] = [];
  try {
    for await (const w of t.client.workflow.list({ query: `WorkflowId = '${sweepWorkflowId(made.id)}'` })) lengths.push((await t.client.workflow.getHandle(sweepWorkflowId(made.id), w.runId).fetchHistory()).events!.length);
  } finally {
    await t.close();
  }
  say(`a ${n}-trial random sweep of \`true\` (32 at a time, 32 fake cards): ${s.state} in ${secs.toFixed(0)} s (${(n / secs).toFixed(1)} trials/s); ${s.reason}`);
  say(`  every trial accounted for: ${s.trials.started} started, ${s.trials.ended} ended, ${s.leaderboard.length} on the leaderboard`);
  say(`  its workflow: ${lengths.length} runs (continued as new), the longest ${Math.max(...lengths)} events, ${lengths.reduce((a, b) => a + b, 0)} in all`);
}

const services = await startSharedServices('bench-sweep');
// Jobs run as the agent's own user: the trials read examples/ and the SDK from this checkout.
const c = await startCluster('bench-sweep', { agents: [{ nodeId: 'sw', gpus: 32, env: { GPUPLANE_JOB_USERS: 'agent' } }] }, services);
try {
  const work = path.join(c.work, 'sweeps');
  fs.mkdirSync(work, { recursive: true });
  say(`bench/sweep on ${(await import('node:os')).cpus().length} cores, ${new Date().toISOString()}`);
  if (!args['skip-asha']) await asha(c, work);
  if (!args['skip-overhead']) await overhead(c, work);
  if (!args['skip-big']) await big(c);
} finally {
  await c.stop();
  await services.stop();
}
