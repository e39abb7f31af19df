import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuctlPath } from './support/cluster.ts';
import { freePort } from './support/ports.ts';
import { startGpuctlUp, type GpuctlUp } from './support/gpuctl-up.ts';

const repo = path.resolve(import.meta.dirname, '..');

/**
 * Whether a job user (any other uid) can read the checkout's examples and SDK: every folder
 * above them searchable by others, the files readable. A clone in a 0700 folder (mktemp -d,
 * /root) is not: there the README sends a one-person machine to `--job-users agent`.
 */
function checkoutReadableByOthers(): boolean {
  for (let d = repo; ; d = path.dirname(d)) {
    if ((fs.statSync(d).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) break;
  }
  return (fs.statSync(path.join(repo, 'examples/train_ckpt.py')).mode & 0o004) !== 0;
}

/** The README's tour: the first bash block under "A five-minute tour", as a reader copies it. */
function tourBlock(): string {
  const readme = fs.readFileSync(path.join(repo, 'README.md'), 'utf8');
  const section = readme.split('\n## A five-minute tour\n')[1]?.split('\n## ')[0];
  const block = section && /```bash\n([\s\S]*?)\n```/.exec(section)?.[1];
  if (!block) throw new Error('README.md has no bash block under "## A five-minute tour"');
  return block;
}

/**
 * The README's promotion of the tour's best, as it names it after the tour: `gpuctl best --run
 * "$run" --register …`, run with the tour's `$run`.
 */
function registerCommand(): string {
  const readme = fs.readFileSync(path.join(repo, 'README.md'), 'utf8');
  const command = /`(gpuctl best --run "\$run" --register [^`]+)`/.exec(readme)?.[1];
  if (!command) throw new Error('README.md names no `gpuctl best --run "$run" --register …`');
  return command;
}

interface ListedCheckpoint {
  id: string;
  run_id: string;
  step: number | null;
  eval_value: number | string | null;
  train_value: number | string | null;
}

/** The checkpoint with the lowest value of `key` (ties to the later step, as GET /checkpoints/best breaks them). */
function lowestBy(cs: ListedCheckpoint[], key: 'eval_value' | 'train_value'): ListedCheckpoint {
  const valued = cs.filter((c) => typeof c[key] === 'number');
  return valued.reduce((a, b) => ((b[key] as number) < (a[key] as number) || (b[key] === a[key] && (b.step ?? 0) > (a.step ?? 0)) ? b : a));
}

/**
 * The tour runs as written, against a scratch plane started the way the README starts one
 * (`gpuctl up`, embedded defaults, fake cards), with `gpuctl` on PATH as `npm link` puts it.
 * As root, its jobs run as job users (the agent's default there), as a reader's would.
 */
describe('the README tour', () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-tour-home-'));
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-tour-bin-'));
  let up: GpuctlUp | null = null;
  let env: NodeJS.ProcessEnv = {};

  beforeAll(async () => {
    fs.symlinkSync(gpuctlPath, path.join(bin, 'gpuctl'));
    const apiPort = await freePort();
    env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, GPUPLANE_HOME: home, GPUPLANE_API_URL: `http://127.0.0.1:${apiPort}`, GPUPLANE_LOG_LEVEL: 'warn' };
    for (const k of ['TEMPORAL_ADDRESS', 'DATABASE_URL', 'GPUPLANE_TOKEN', 'GPUPLANE_ADMIN_TOKEN', 'GPUPLANE_NODE_TOKEN', 'GPUPLANE_JOB_USERS']) delete env[k];
    // As the README says: a checkout job users cannot read is toured with jobs as the agent's user.
    if (process.getuid?.() === 0 && !checkoutReadableByOthers()) env.GPUPLANE_JOB_USERS = 'agent';
    up = await startGpuctlUp(['--fake-gpus', '4', '--port', String(apiPort), '--temporal-port', String(await freePort()), '--temporal-ui-port', String(await freePort())], env);
  }, 200_000);
  afterAll(async () => {
    await up?.stop();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(bin, { recursive: true, force: true });
  });

  it('every command of the tour succeeds, and it ends with the evaluated best checkpoint and a retried job that succeeds', async () => {
    // Each command's exit status is checked (-e), and a failing one is named.
    // After the tour (its evaluations long finished), the README's promotion of its evaluated best,
    // and the run's checkpoints as the API lists them, to judge it by.
    const listed = path.join(home, 'tour-checkpoints.json');
    const promote = `${registerCommand()}\ngpuctl checkpoints --run "$run" --json > ${JSON.stringify(listed)}`;
    const script = `set -eo pipefail\ntrap 'echo "tour command failed ($?): $BASH_COMMAND" >&2' ERR\n${tourBlock()}\n${promote}\necho "tour done: $bad"\n`;
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn('bash', ['-c', script], { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d: Buffer) => (stdout += d));
      p.stderr.on('data', (d: Buffer) => (stderr += d));
      p.once('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(r.code, `${r.stderr}\n${r.stdout}`.slice(-4000)).toBe(0);
    // The evaluation story: every checkpoint evaluated before the curves are read, the eval
    // series under train/loss at the checkpoints' steps, the leaderboard naming its metrics.
    expect(r.stdout).toMatch(/^evaluations: 6 SUCCEEDED$/m);
    expect(r.stdout).toMatch(/^eval\/loss @ checkpoints \(beside train\/loss\)\nSTEP\s+eval\/loss\s+CHECKPOINT\n(?:\d+\s+\S+\s+ckpt-\S+\n){5}60\s+\S+\s+ckpt-\S+$/m);
    // The examples overfit on purpose: the eval curve turns up while train/loss keeps falling.
    const block = r.stdout.split('eval/loss @ checkpoints (beside train/loss)\n')[1].split('\n\n')[0];
    const points = [...block.matchAll(/^(\d+)\s+(\S+)\s+ckpt-\S+$/gm)].map((m) => [Number(m[1]), Number(m[2])]);
    expect(points.map(([step]) => step)).toEqual([10, 20, 30, 40, 50, 60]);
    const lowest = Math.min(...points.map(([, v]) => v));
    expect(points[5][1]).toBeGreaterThan(lowest);
    expect(r.stdout).toMatch(/^ID\s+RUN\s+STEP\s+EVAL eval\/loss\s+TRAIN train\/loss\s+SIZE\s+CREATED$/m);
    expect(r.stdout).toMatch(/^best: +ckpt-/m);
    expect(r.stdout).toMatch(/^metric: eval\/loss = /m);
    expect(r.stdout).toMatch(/FAILED: metric train\/loss ended NaN\/Inf \(exit code 1\) — hint: lower the learning rate/);
    const bad = /tour done: (job-\S+)/.exec(r.stdout)![1];
    expect(r.stdout).toContain(`${bad} SUCCEEDED`);
    // The fork goes on from the best checkpoint's step, and the lineage shows it under the tour's run.
    expect(r.stdout).toMatch(/^job-\S+ SUCCEEDED$/m);
    expect(r.stdout).toMatch(/^ {2}forked from ckpt-\S+ @ step \d+: run run-\S+ finished job job-\S+#1 \(demo\/tour\)$/m);
    expect(r.stdout).toMatch(/^ {4}changes: params\.lr not given \(run logged 0\.02\) → 0\.005, workingDir /m);
    // The sweep: every trial accounted for, most stopped by ASHA, a best trial named.
    const ended = /^swp-\S+ SUCCEEDED: 9 trials: (\d+) succeeded, 0 failed, (\d+) stopped by ASHA, 0 cancelled$/m.exec(r.stdout);
    expect(ended, r.stdout.slice(-3000)).not.toBeNull();
    expect(Number(ended![1]) + Number(ended![2])).toBe(9);
    expect(Number(ended![2])).toBeGreaterThanOrEqual(4);
    expect(r.stdout).toMatch(/^best: +trial \d+ \(job job-\S+\): \S+ at step 90$/m);

    // gpuctl best --register demo-model --alias champion: version 1 is the evaluated best
    // checkpoint, step 30, with the evaluation that justified it; not the training-time best.
    const registered = /^registered demo\/demo-model version 1 \(alias champion\): checkpoint (ckpt-\S+), step (\d+), eval\/loss = (\S+) \(evaluation (\S+); minimise, from the global default\)$/m.exec(r.stdout);
    expect(registered, r.stdout.slice(-3000)).not.toBeNull();
    const [, ckpt, step, value, evaluation] = registered!;
    const cs = (JSON.parse(fs.readFileSync(listed, 'utf8')) as { checkpoints: ListedCheckpoint[] }).checkpoints;
    expect(cs.map((c) => c.step)).toEqual([10, 20, 30, 40, 50, 60]);
    const evaluatedBest = lowestBy(cs, 'eval_value');
    const trainingBest = lowestBy(cs, 'train_value');
    expect({ ckpt, step: Number(step), value: Number(value) }).toEqual({ ckpt: evaluatedBest.id, step: 30, value: evaluatedBest.eval_value });
    expect(trainingBest.step).toBe(60);
    expect(trainingBest.id).not.toBe(ckpt);
    // Through MLflow's registry: the champion is version 1, the checkpoint's files and evaluation.
    const token = fs.readFileSync(path.join(home, 'admin-token'), 'utf8').trim();
    const res = await fetch(`${env.GPUPLANE_API_URL}/mlflow/api/2.0/mlflow/registered-models/alias?name=demo%2Fdemo-model&alias=champion`, { headers: { authorization: `Bearer ${token}` } });
    const mv = ((await res.json()) as { model_version: { version: string; run_id: string; tags: { key: string; value: string }[] } }).model_version;
    const tags = Object.fromEntries(mv.tags.map((t) => [t.key, t.value]));
    expect({ version: mv.version, run: mv.run_id, checkpoint: tags['gpuplane.checkpoint_id'], evaluation: tags['gpuplane.evaluation_id'], source: tags['gpuplane.metric_source'] }).toEqual({ version: '1', run: evaluatedBest.run_id, checkpoint: ckpt, evaluation, source: 'evaluation' });
  }, 300_000);
});
