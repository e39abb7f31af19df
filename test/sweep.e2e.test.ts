import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweepDetailJson, SweepJson } from '../cli/api-types.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { objectiveSweep } from './support/sweeps.ts';
import { connectClient } from '../temporal/setup.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId, sweepWorkflowId } from '../workflows/names.ts';
import type { SweepWorkflowInput } from '../workflows/types.ts';
import type { SweepSpec } from '../domain/sweep-spec.ts';
import { until } from './support/poll.ts';

const gpuctl = (env: NodeJS.ProcessEnv, args: string[]) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [gpuctlPath, ...args], { env }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });

/** The loss of examples/sweep_objective.py. */
const loss = (lr: number, step: number) => 0.5 * (Math.log10(lr) + 2) ** 2 + 1 / (1 + 10 * lr) / Math.sqrt(step);

/** The most trials that were running at once, from their jobs' start and end times. */
function maxOverlap(spans: { started_at: Date | null; ended_at: Date | null }[]): number {
  const edges = spans.filter((s) => s.started_at).flatMap((s) => [[s.started_at!.getTime(), 1] as const, [(s.ended_at ?? new Date()).getTime(), -1] as const]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let max = 0;
  for (const [, d] of edges) max = Math.max(max, (now += d));
  return max;
}

/** Sweeps on real processes (fake cards): grid, seeded random, ASHA on a scripted objective reported through the SDK, and cancel. */
describe('sweeps, end to end', () => {
  let c: Cluster;
  let db: pg.Client;
  let env: NodeJS.ProcessEnv;
  let work: string;
  beforeAll(async () => {
    c = await startCluster('sweep', { agents: [{ nodeId: 'sw1', gpus: 4 }], env: { GPUPLANE_SWEEP_POLL_MS: '300' } });
    env = { ...c.env, GPUPLANE_API_URL: c.apiUrl };
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
    work = path.join(c.work, 'sweeps');
    fs.mkdirSync(work, { recursive: true });
  });
  afterAll(async () => {
    await db?.end();
    await c?.stop();
  });

  const show = (id: string) => c.client.request<SweepDetailJson>('GET', `/sweeps/${id}`);
  const ended = (id: string, timeoutMs = 120_000) =>
    until(
      `sweep ${id} ended`,
      async () => {
        const s = await show(id);
        return s.state !== 'RUNNING' ? s : null;
      },
      timeoutMs,
    );
  const trialJobs = async (sweepId: string) =>
    (
      await db.query<{ trial: number; job_id: string; params: Record<string, unknown>; state: string; attempt: number; reason: string | null; started_at: Date | null; ended_at: Date | null; env: Record<string, string> }>(
        'select t.trial, t.job_id, t.params, j.state, j.attempt, j.reason, j.started_at, j.ended_at, j.env from sweep_trials t join jobs j on j.id = t.job_id where t.sweep_id = $1 order by t.trial',
        [sweepId],
      )
    ).rows;

  it('a grid of 9 points from a YAML file runs exactly 9 trials, at most max_concurrent at once', async () => {
    const file = path.join(work, 'grid.yaml');
    fs.writeFileSync(
      file,
      [
        'project: sweep-e2e',
        'experiment: grid',
        'command: sleep 0.5',
        'gpus: 1',
        'method: grid',
        'max_concurrent: 3',
        'parameters:',
        '  lr: {values: [0.1, 0.01, 0.001]}',
        '  batch: {values: [16, 32, 64]}',
        '',
      ].join('\n'),
    );
    const made = await gpuctl(env, ['sweep', 'create', file]);
    expect(made.stderr).toBe('');
    expect(made.code).toBe(0);
    const id = made.stdout.trim().split('\n').pop()!;
    expect(id).toMatch(/^swp-/);
    const s = await ended(id);
    expect(s).toMatchObject({ state: 'SUCCEEDED', method: 'grid', trials: { total: 9, started: 9, running: 0, ended: 9 } });
    const jobs = await trialJobs(id);
    expect(jobs).toHaveLength(9);
    expect(jobs.every((j) => j.state === 'SUCCEEDED' && j.attempt === 1)).toBe(true);
    // Every point of the grid once, in the documented order (names sorted, the last fastest).
    expect(jobs.map((j) => j.params)).toEqual([16, 32, 64].flatMap((batch) => [0.1, 0.01, 0.001].map((lr) => ({ batch, lr }))));
    expect(jobs.every((j) => j.env.GPUPLANE_SWEEP_ID === id)).toBe(true);
    // Each trial's run is tagged with its sweep and trial.
    const tags = (await db.query<{ system_tags: Record<string, string> }>('select r.system_tags from sweep_trials t join runs r on r.job_id = t.job_id where t.sweep_id = $1 order by t.trial', [id])).rows;
    expect(tags.map((r) => r.system_tags)).toEqual(jobs.map((j) => ({ sweep: id, 'sweep.trial': String(j.trial) })));
    const overlap = maxOverlap(jobs);
    expect(overlap).toBeLessThanOrEqual(3);
    expect(overlap).toBeGreaterThanOrEqual(2);
    // The trials are TRAIN jobs of the sweep's project and experiment, each with its run carrying the point.
    const runs = await db.query<{ params: Record<string, unknown>; project: string; experiment: string }>(
      'select r.params, p.name as project, e.name as experiment from runs r join projects p on p.id = r.project_id join experiments e on e.id = r.experiment_id where r.job_id = $1',
      [jobs[4].job_id],
    );
    expect(runs.rows).toEqual([{ params: { batch: 32, lr: 0.01 }, project: 'sweep-e2e', experiment: 'grid' }]);
    // gpuctl sweep show and gpuctl sweeps.
    const shown = await gpuctl(env, ['sweep', 'show', id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('9 of 9 started, 0 running, 9 ended');
    expect(shown.stdout).toContain('batch=32 lr=0.01');
    const listed = JSON.parse((await gpuctl(env, ['sweeps', '--json', '--project', 'sweep-e2e'])).stdout) as SweepJson[];
    expect(listed.map((x) => x.id)).toContain(id);
  });

  it('a seeded random sweep draws the same points twice; one without a seed records the seed it drew', async () => {
    const spec = (seed?: number) => ({
      project: 'sweep-e2e',
      command: 'true',
      gpus: 1,
      method: 'random',
      max_trials: 4,
      max_concurrent: 4,
      ...(seed === undefined ? {} : { seed }),
      parameters: { lr: { min: 1e-4, max: 1, distribution: 'log_uniform' }, layers: { min: 2, max: 8, distribution: 'int_uniform' }, opt: { values: ['adam', 'sgd'] } },
    });
    const a = await c.client.request<SweepDetailJson>('POST', '/sweeps', spec(11));
    const b = await c.client.request<SweepDetailJson>('POST', '/sweeps', spec(11));
    const other = await c.client.request<SweepDetailJson>('POST', '/sweeps', spec());
    expect(a.seed).toBe(11);
    expect(Number.isInteger(other.seed)).toBe(true);
    // The metric defaults to the primary metric in force (the global default here), as minimize/maximize.
    expect(a.metric).toEqual({ name: 'eval/loss', goal: 'minimize' });
    await Promise.all([ended(a.id), ended(b.id), ended(other.id)]);
    const pa = (await trialJobs(a.id)).map((j) => j.params);
    const pb = (await trialJobs(b.id)).map((j) => j.params);
    expect(pa).toHaveLength(4);
    expect(pb).toEqual(pa);
    expect(new Set(pa.map((p) => p.lr)).size).toBe(4);
    for (const p of pa) {
      expect(p.lr as number).toBeGreaterThanOrEqual(1e-4);
      expect(p.lr as number).toBeLessThanOrEqual(1);
      expect(Number.isInteger(p.layers)).toBe(true);
      expect(['adam', 'sgd']).toContain(p.opt);
    }
    expect((await trialJobs(other.id)).map((j) => j.params)).not.toEqual(pa);
  });

  it('ASHA on a scripted objective finds the best lr, stops most trials at the first rung, and uses well under the grid’s steps', async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'sweep-e2e', experiment: 'asha', ...objectiveSweep({ workdir: work, trials: 12, seed: 3, stepSleepS: 0.03 }) });
    expect(s0.rungs).toEqual([10, 30, 90]);
    const s = await ended(s0.id, 240_000);
    expect(s.state).toBe('SUCCEEDED');
    const jobs = await trialJobs(s.id);
    expect(jobs).toHaveLength(12);
    const lrs = jobs.map((j) => j.params.lr as number);
    const bestLr = lrs.reduce((a, b) => (loss(b, 90) < loss(a, 90) ? b : a));
    // The best trial is the one the full runs would find best.
    expect(s.best).not.toBeNull();
    expect(jobs[s.best!.trial].params.lr).toBe(bestLr);
    expect(s.leaderboard[0].params.lr).toBe(bestLr);
    expect(s.leaderboard[0].rung_step).toBe(90);
    // Most trials were stopped at the first rung, with the reason the issue names.
    const stopped = jobs.filter((j) => j.state === 'CANCELLED');
    expect(stopped.length).toBeGreaterThanOrEqual(6);
    for (const j of stopped) expect(j.reason).toMatch(new RegExp(`^stopped by sweep ${s.id} at rung \\d \\(value [0-9.e-]+, cut-off [0-9.e-]+\\)$`));
    const atFirst = s.leaderboard.filter((t) => t.stopped && t.rung === 0).length;
    expect(atFirst).toBeGreaterThanOrEqual(5);
    expect(s.reason).toMatch(/12 trials: \d+ succeeded, 0 failed, \d+ stopped by ASHA, 0 cancelled/);
    // Each trial waited at its rungs for the sweep's verdict (the SDK does): a stopped one logged no step past the rung it was stopped at.
    for (const t of s.leaderboard.filter((x) => x.stopped)) expect(t.last!.step, `trial ${t.trial}`).toBe(t.rung_step);
    // The steps the trials used, against the grid's 12 × 90.
    const used = s.leaderboard.reduce((n, t) => n + (t.last?.step ?? 0), 0);
    expect(used).toBeLessThan(0.5 * 12 * 90);
    // The verdict route: a run that is no trial has nothing to wait for; a bad step is a 400 that names it; an unknown run a 404.
    const plain = await c.client.request<{ id: string }>('POST', '/runs', { project: 'sweep-e2e' });
    const verdict = (run: string, q: string) => fetch(`${c.apiUrl}/api/v1/runs/${run}/rung-verdict?${q}`, { headers: c.auth });
    expect(await (await verdict(plain.id, 'step=10')).json()).toEqual({ decision: 'continue', rung: null, step: null, reason: null });
    const bad = await verdict(plain.id, 'step=ten');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toMatch(/step/);
    expect((await verdict('run-nope', 'step=1')).status).toBe(404);
  });

  it('cancelling a sweep cancels its running trials and starts no more', async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'sweep-e2e', command: 'sleep 120', gpus: 1, method: 'grid', max_concurrent: 2, parameters: { x: { values: [1, 2, 3, 4, 5, 6] } } });
    await until('two trials running', async () => (await trialJobs(s0.id)).filter((j) => j.state === 'RUNNING').length === 2, 60_000);
    const r = await gpuctl(env, ['sweep', 'cancel', s0.id, '--reason', 'enough']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const s = await ended(s0.id);
    expect(s.state).toBe('CANCELLED');
    expect(s.reason).toMatch(/^cancelled by user: enough; 2 trials: 0 succeeded, 0 failed, 0 stopped by ASHA, 2 cancelled$/);
    const jobs = await trialJobs(s0.id);
    expect(jobs).toHaveLength(2);
    expect(jobs.map((j) => j.state)).toEqual(['CANCELLED', 'CANCELLED']);
    expect(jobs[0].reason).toBe(`cancelled with sweep ${s0.id} (cancelled by user: enough)`);
    // Nothing of it holds a card, and a second cancel is refused.
    const held = await db.query('select 1 from gpu_slots where owner_job_id = any($1)', [jobs.map((j) => j.job_id)]);
    expect(held.rows).toHaveLength(0);
    const again = await gpuctl(env, ['sweep', 'cancel', s0.id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already ended CANCELLED.*HTTP 409/);
  });

  it("Cancel on the sweep's workflow in the Temporal UI is the same cancel", async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'sweep-e2e', command: 'sleep 120', gpus: 1, method: 'grid', max_concurrent: 1, parameters: { x: { values: [1, 2, 3] } } });
    await until('a trial running', async () => (await trialJobs(s0.id)).some((j) => j.state === 'RUNNING'), 60_000);
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      await t.client.workflow.getHandle(sweepWorkflowId(s0.id)).cancel();
    } finally {
      await t.close();
    }
    const s = await ended(s0.id);
    expect(s.state).toBe('CANCELLED');
    expect(s.reason).toBe('cancelled in Temporal (workflow cancel request); 1 trial: 0 succeeded, 0 failed, 0 stopped by ASHA, 1 cancelled');
    expect((await trialJobs(s0.id)).map((j) => j.state)).toEqual(['CANCELLED']);
  });

  it('retry_failed: a failed trial is retried as its next attempt, once; a second failure is its result', async () => {
    const dir = path.join(work, 'retry');
    fs.mkdirSync(dir, { recursive: true });
    // x=1 fails its first attempt only; x=2 fails every time.
    const command = `case "$GPUPLANE_PARAMS" in *'"x": 1'*|*'"x":1'*) if [ -f once ]; then exit 0; fi; touch once; exit 3;; *) exit 4;; esac`;
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'sweep-e2e', command, workdir: dir, gpus: 1, method: 'grid', retry_failed: 1, parameters: { x: { values: [1, 2] } } });
    const s = await ended(s0.id);
    expect(s.state).toBe('SUCCEEDED');
    expect(s.reason).toBe('2 trials: 1 succeeded, 1 failed, 0 stopped by ASHA, 0 cancelled');
    const jobs = await trialJobs(s0.id);
    expect(jobs.map((j) => [j.params.x, j.state, j.attempt])).toEqual([
      [1, 'SUCCEEDED', 2],
      [2, 'FAILED', 2],
    ]);
  });

  it('a sweep workflow terminated in Temporal is started again, finds its trials where they are, and continues as new every few turns', async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'sweep-e2e', command: 'sleep 1', gpus: 1, method: 'grid', max_concurrent: 2, parameters: { x: { values: [1, 2, 3, 4, 5, 6] } } });
    await until('a trial running', async () => (await trialJobs(s0.id)).some((j) => j.state === 'RUNNING'), 60_000);
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      const handle = t.client.workflow.getHandle(sweepWorkflowId(s0.id));
      const first = await handle.describe();
      await handle.terminate('terminated in the test, as the Temporal UI does');
      // Started again (what the control worker's reconciler does within a minute), with a run of 3 turns.
      await t.client.workflow.start('sweepWorkflow', {
        workflowId: sweepWorkflowId(s0.id),
        taskQueue: CONTROL_TASK_QUEUE,
        args: [{ sweepId: s0.id, spec: s0.spec as SweepSpec, trialTimeouts: { heartbeatTimeoutMs: 5000, lostAfterMs: 12_000 }, pollMs: 300, stopGraceMs: 5000, turnsPerRun: 3 } satisfies SweepWorkflowInput],
      });
      const s = await ended(s0.id);
      expect(s.state).toBe('SUCCEEDED');
      const jobs = await trialJobs(s0.id);
      expect(jobs.map((j) => j.params.x)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(jobs.every((j) => j.state === 'SUCCEEDED' && j.attempt === 1)).toBe(true);
      expect((await db.query(`select 1 from jobs where env->>'GPUPLANE_SWEEP_ID' = $1`, [s0.id])).rows).toHaveLength(6);
      // Each trial's job workflow ran once: the restarted sweep followed the ended ones, and started none again.
      for (const j of jobs) {
        let n = 0;
        for await (const w of t.client.workflow.list({ query: `WorkflowId = '${jobWorkflowId(j.job_id)}'` })) if (w.type === 'jobWorkflow') n++;
        expect(n).toBe(1);
      }
      // The runs after the restart: more than one (continued as new), each short.
      const runs: string[] = [];
      for await (const w of t.client.workflow.list({ query: `WorkflowId = '${sweepWorkflowId(s0.id)}'` })) if (w.runId !== first.runId) runs.push(w.runId);
      expect(runs.length).toBeGreaterThan(1);
      for (const r of runs) expect((await t.client.workflow.getHandle(sweepWorkflowId(s0.id), r).fetchHistory()).events!.length).toBeLessThan(200);
    } finally {
      await t.close();
    }
  });

  it('an asha sweep that never polls still stops its trials: the API wakes it as a trial passes a rung', async () => {
    // Trials that do not wait at their rungs (GPUPLANE_SWEEP_RUNG_WAIT_S=0; as an MLflow script's): the sweep's stop alone ends them.
    const spec = objectiveSweep({ workdir: work, trials: 6, seed: 9, stepSleepS: 0.05, concurrent: 3 });
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'sweep-e2e', ...spec, env: { ...(spec.env as Record<string, string>), GPUPLANE_SWEEP_RUNG_WAIT_S: '0' } });
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      await t.client.workflow.getHandle(sweepWorkflowId(s0.id)).terminate('to start it again without a poll');
      await t.client.workflow.start('sweepWorkflow', {
        workflowId: sweepWorkflowId(s0.id),
        taskQueue: CONTROL_TASK_QUEUE,
        args: [{ sweepId: s0.id, spec: s0.spec as SweepSpec, trialTimeouts: { heartbeatTimeoutMs: 5000, lostAfterMs: 12_000 }, pollMs: 3_600_000, stopGraceMs: 5000 } satisfies SweepWorkflowInput],
      });
    } finally {
      await t.close();
    }
    const s = await ended(s0.id);
    expect(s.state).toBe('SUCCEEDED');
    const stopped = s.leaderboard.filter((x) => x.stopped);
    expect(stopped.length).toBeGreaterThanOrEqual(2);
    // Stopped soon after its rung: well before the 90 steps of a trial left to run.
    for (const x of stopped) expect(x.last!.step).toBeLessThan(x.rung_step! + 40);
  });

  it('a retried create (the same Idempotency-Key and file) makes one sweep, even when the tries race; the key with another file is a 409', async () => {
    const body = { project: 'sweep-e2e', experiment: 'idem', command: 'true', gpus: 0, method: 'grid', parameters: { x: { values: [1, 2] } } };
    const post = (key: string, b: unknown = body) => fetch(`${c.apiUrl}/api/v1/sweeps`, { method: 'POST', headers: { ...c.auth, 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(b) });
    const count = async () => (await db.query<{ n: number }>("select count(*)::int as n from sweeps s join experiments e on e.id = s.experiment_id where e.name = 'idem'")).rows[0].n;
    const first = await post('create-1');
    expect(first.status).toBe(201);
    const made = (await first.json()) as SweepDetailJson;
    const again = await post('create-1');
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as SweepDetailJson).id).toBe(made.id);
    // Two tries at once, as a client that timed out and retried: one sweep.
    const raced = await Promise.all([post('create-2'), post('create-2'), post('create-2')]);
    const ids = await Promise.all(raced.map(async (r) => ((await r.json()) as SweepDetailJson).id));
    expect(raced.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(new Set(ids).size).toBe(1);
    expect(await count()).toBe(2);
    const other = await post('create-1', { ...body, parameters: { x: { values: [3] } } });
    expect(other.status).toBe(409);
    expect(((await other.json()) as { message: string }).message).toBe(`Idempotency-Key "create-1" was already used with a different sweep file (sweep ${made.id}); use a new key for a new sweep`);
    const badKey = await post('');
    expect(badKey.status).toBe(400);
    expect(((await badKey.json()) as { message: string }).message).toBe('Idempotency-Key must be 1 to 200 printable ASCII characters');
    expect(await count()).toBe(2);
    for (const id of [made.id, ids[0]]) expect((await ended(id)).trials).toMatchObject({ total: 2, started: 2, ended: 2 });
  });

  it('a bad sweep file is refused with its field named, and creates nothing', async () => {
    const file = path.join(work, 'bad.yaml');
    fs.writeFileSync(file, 'command: x\nmethod: random\nmax_trials: 3\nparameters:\n  lr: {min: 1, max: 0.1, distribution: uniform}\n');
    const r = await gpuctl(env, ['sweep', 'create', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`gpuctl: ${file}: parameters.lr.min: must be below max\n`);
    const before = (await db.query('select count(*)::int as n from sweeps')).rows[0].n;
    const res = await fetch(`${c.apiUrl}/api/v1/sweeps`, { method: 'POST', headers: { ...c.auth, 'content-type': 'application/json' }, body: JSON.stringify({ command: 'x', method: 'grid', max_concurrent: 5, parameters: { a: { values: [1, 2] } } }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toBe("sweep file: max_concurrent: 5 is more than the sweep's 2 trials");
    expect((await db.query('select count(*)::int as n from sweeps')).rows[0].n).toBe(before);
  });
});
