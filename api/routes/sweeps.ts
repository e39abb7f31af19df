/** Sweeps (docs/sweeps.md): created here, run by their workflows (workflows/sweep-workflow.ts). */
import { randomInt } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import { bestCandidates } from '../../db/queries/checkpoints.ts';
import { ensureExperiment, ensureProject, findProjectId, primaryMetricSettings } from '../../db/queries/projects.ts';
import { ashaSweepOfRun, getSweep, insertSweep, listSweeps, runningSweepSpecs, sweepOfKey, sweepScopeNames, sweepTrialRows, trialCounts, type TrialRow } from '../../db/queries/sweeps.ts';
import { newId } from '../../db/ids.ts';
import type { Sweep } from '../../db/schema.ts';
import { projectQuotaList } from '../../db/queries/quotas.ts';
import { ashaRungSteps, ashaSettings, compareValues } from '../../domain/asha.ts';
import { quotaFor } from '../../domain/fair-share.ts';
import { cpuTrialsOf, DEFAULT_MAX_CPU_TRIALS, limitConcurrency } from '../../domain/sweep-limits.ts';
import { bestCheckpoint } from '../../domain/best-checkpoint.ts';
import { encodeValue } from '../../domain/metrics.ts';
import { resolvePrimaryMetric, trainCounterpart } from '../../domain/primary-metric.ts';
import { SweepSpecError, sweepMetricOf, sweepTrialCount, validateSweepSpec, type SweepGoal, type SweepSpec } from '../../domain/sweep-spec.ts';
import { queryTrialVerdict, signalCancelSweep, startSweepWorkflow } from '../../temporal/sweep-ops.ts';
import { allows, visibleProjectIds } from '../auth/auth.ts';
import type { ApiDeps } from '../deps.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import { IdempotencyHeaders } from '../schemas/runs.ts';
import { BAD_KEY, isIdempotencyKey, KeyTaken, requestHash } from '../idempotency.ts';
import { CancelSweepBody, RungVerdictQuery, RungVerdictSchema, SweepDetailSchema, SweepListQuery, SweepListSchema, SweepSchema, SweepSpecSchema } from '../schemas/sweeps.ts';
import { runOrNotFound } from './runs.ts';

type Names = { project: string | null; experiment: string | null };
type Counts = { trials: number; running: number; ended: number };

function sweepJson(s: Sweep, names: Names, counts: Counts | undefined) {
  return {
    id: s.id,
    project: names.project,
    experiment: names.experiment,
    state: s.state,
    reason: s.reason,
    method: s.spec.method,
    metric: s.spec.metric!,
    seed: s.spec.seed!,
    spec: s.spec,
    trials: { total: sweepTrialCount(s.spec), started: counts?.trials ?? 0, running: counts?.running ?? 0, ended: counts?.ended ?? 0 },
    created_by: s.createdBy,
    created_at: s.createdAt.toISOString(),
    ended_at: s.endedAt?.toISOString() ?? null,
  };
}

/** A trial's best value of the metric and its step, by the goal; null when it logged no number of it. */
function bestOf(r: TrialRow, goal: SweepGoal): { value: number; step: number } | null {
  const s = r.summary;
  if (!s) return null;
  const [value, step] = goal === 'minimize' ? [s.min, s.minStep] : [s.max, s.maxStep];
  return value === null || step === null ? null : { value, step };
}

/** The leaderboard's order: ASHA's highest rung first, then the best value by the goal; trials without a value last, in trial order. */
function rank(rows: TrialRow[], goal: SweepGoal, asha: boolean): TrialRow[] {
  const key = (r: TrialRow) => ({ rung: asha ? (r.trial.rung ?? -1) : 0, best: bestOf(r, goal) });
  return [...rows].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (!ka.best || !kb.best) return ka.best ? -1 : kb.best ? 1 : a.trial.trial - b.trial.trial;
    return kb.rung - ka.rung || compareValues(ka.best.value, kb.best.value, goal) || a.trial.trial - b.trial.trial;
  });
}

export const sweepRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db, client } = deps;
  const sweepStart = { timeouts: deps.timeouts, pollMs: deps.sweepPollMs, stopGraceS: deps.preemptGraceS };

  async function detail(s: Sweep) {
    const [names, counts] = await Promise.all([sweepScopeNames(db, [s.id]), trialCounts(db, [s.id])]);
    const metric = s.spec.metric!;
    const isAsha = s.spec.method === 'asha';
    const rungs = isAsha ? ashaRungSteps(ashaSettings(s.spec)) : [];
    const rows = rank(await sweepTrialRows(db, s.id, metric.name), metric.goal, isAsha);
    const leaderboard = rows.map((r) => {
      const best = bestOf(r, metric.goal);
      const rung = r.trial.rung;
      return {
        trial: r.trial.trial,
        job_id: r.job.id,
        run_id: r.runId,
        params: r.trial.params,
        state: r.job.state,
        attempt: r.job.attempt,
        reason: r.job.reason,
        best: best ? { value: encodeValue(best.value), step: best.step } : null,
        last: r.summary ? { value: encodeValue(r.summary.last), step: r.summary.lastStep } : null,
        rung,
        rung_step: rung === null ? null : (rungs[rung] ?? null),
        stopped: r.trial.stoppedReason !== null,
      };
    });
    return { ...sweepJson(s, names.get(s.id) ?? { project: null, experiment: null }, counts.get(s.id)), rungs, leaderboard, best: await bestTrial(rows, metric) };
  }

  /**
   * The sweep's best trial: the one whose run holds the best checkpoint by the sweep's metric
   * (evaluations first, GET /checkpoints/best's rule); with no checkpoint that has it, the
   * leaderboard's first trial with a value.
   */
  async function bestTrial(rows: TrialRow[], metric: { name: string; goal: SweepGoal }) {
    const byRun = new Map(rows.filter((r) => r.runId).map((r) => [r.runId!, r]));
    const candidates = await bestCandidates(db, { runIds: [...byRun.keys()] });
    const resolved = { name: metric.name, goal: metric.goal === 'minimize' ? ('min' as const) : ('max' as const), level: 'experiment' as const, train_metric: trainCounterpart(metric.name) };
    const best = bestCheckpoint(candidates, resolved);
    if (best) {
      const r = byRun.get(best.checkpoint.runId)!;
      return { trial: r.trial.trial, job_id: r.job.id, run_id: r.runId, value: encodeValue(best.value), step: best.checkpoint.step, checkpoint_id: best.checkpoint.id, fallback: best.fallback };
    }
    const first = rows.find((r) => bestOf(r, metric.goal));
    if (!first) return null;
    const b = bestOf(first, metric.goal)!;
    return { trial: first.trial.trial, job_id: first.job.id, run_id: first.runId, value: encodeValue(b.value), step: b.step, checkpoint_id: null, fallback: false };
  }

  /**
   * The sweep file with max_concurrent within its limits (domain/sweep-limits.ts): cards at once within the project's
   * quota over the whole cluster, zero-card trials (with its running sweeps') within GPUPLANE_MAX_CPU_TRIALS; else 400.
   */
  async function withinLimits(spec: SweepSpec): Promise<SweepSpec> {
    const projectId = spec.project ? await findProjectId(db, spec.project) : undefined;
    const q = projectId ? quotaFor(projectId, {}, await projectQuotaList(db)) : null;
    const maxCpuTrials = deps.maxCpuTrials ?? DEFAULT_MAX_CPU_TRIALS;
    const cpuTrialsTaken = projectId ? (await runningSweepSpecs(db, projectId)).reduce((n, s) => n + cpuTrialsOf(s, maxCpuTrials), 0) : 0;
    try {
      return limitConcurrency(spec, { quota: q && { project: spec.project!, pool: q.pool, gpus: q.gpus }, maxCpuTrials, cpuTrialsTaken });
    } catch (err) {
      if (err instanceof SweepSpecError) throw new DomainError('invalid', `sweep file: ${err.message}`);
      throw err;
    }
  }

  /** Starts a sweep's workflow; Temporal away, it is left to the control worker's reconciler (within a minute), and the create still answers. */
  async function startOrLeave(s: Sweep, log: FastifyBaseLogger): Promise<void> {
    await startSweepWorkflow(client, s, sweepStart).catch((err: unknown) => log.warn({ err, sweepId: s.id }, 'sweep: its workflow was not started; the control worker will'));
  }

  /** A create whose Idempotency-Key was seen: the sweep it made, its workflow started if it is not running (the first create's start may have failed). */
  async function replayCreate(reply: FastifyReply, seen: Sweep, hash: string) {
    if (seen.requestHash !== hash) {
      throw new DomainError('conflict', `Idempotency-Key ${JSON.stringify(seen.idempotencyKey)} was already used with a different sweep file (sweep ${seen.id}); use a new key for a new sweep`);
    }
    if (seen.state === 'RUNNING') await startOrLeave(seen, reply.log);
    return reply.status(201).header('idempotent-replayed', 'true').send(await detail(seen));
  }

  app.post(
    '/sweeps',
    {
      schema: {
        tags: ['sweeps'],
        summary: 'Create a sweep: its workflow starts its trials as TRAIN jobs',
        description:
          "The body is the sweep file as JSON (docs/sweeps.md). A mistake is answered 400 naming its field, and nothing is created. `max_concurrent` is bounded: trials that take cards by the project's card quota (max_concurrent × cards a trial at most the quota), zero-card trials, with those of the project's other running sweeps, by GPUPLANE_MAX_CPU_TRIALS; past a bound is 400, and a file without it gets the bound filled in where its trials would pass it.",
        headers: IdempotencyHeaders,
        body: SweepSpecSchema,
        response: { 201: SweepDetailSchema, ...Conflict },
      },
      // The domain's validator is the one rule for the body (gpuctl checks a file with it before sending): it names the field.
      validatorCompiler: ({ httpPart }) =>
        httpPart === 'headers'
          ? (data: unknown) => {
              const key = (data as Record<string, unknown>)['idempotency-key'];
              return key === undefined || isIdempotencyKey(key) ? { value: data } : { error: new Error(BAD_KEY) };
            }
          : (data: unknown) => {
              try {
                return { value: validateSweepSpec(data) };
              } catch (err) {
                if (err instanceof SweepSpecError) return { error: new Error(`sweep file: ${err.message}`) };
                throw err;
              }
            },
    },
    async (req, reply) => {
      const given = req.body as SweepSpec;
      // Keys are per project, as a job submit's: a retried create (the same key and body) answers the sweep the first made.
      const key = req.headers['idempotency-key'];
      const hash = key === undefined ? null : requestHash(given);
      if (key !== undefined) {
        const existing = given.project ? await findProjectId(db, given.project) : null;
        const seen = existing === undefined ? undefined : await sweepOfKey(db, existing, key);
        if (seen) return replayCreate(reply, seen, hash!);
      }
      if (given.experiment && !given.project) throw new DomainError('invalid', 'sweep file: experiment: needs a project');
      const settings = given.project ? await primaryMetricSettings(db, given.project, given.experiment) : undefined;
      const primary = resolvePrimaryMetric(settings?.experiment ?? null, settings?.project ?? null);
      // Filled in, so that the sweep is replayed exactly: its seed, its metric, and max_concurrent within its limits (past one: 400).
      const spec = await withinLimits({ ...given, metric: sweepMetricOf(given, primary), seed: given.seed ?? randomInt(0, 2 ** 32 - 1) });
      const p = req.principal;
      let projectId: string | null = null;
      const s = await db
        .transaction(async (tx) => {
          projectId = spec.project ? await ensureProject(tx, spec.project) : null;
          const experimentId = projectId && spec.experiment ? await ensureExperiment(tx, projectId, spec.experiment) : null;
          const made = await insertSweep(tx, { id: newId('swp'), projectId, experimentId, spec, state: 'RUNNING', createdBy: p && 'name' in p ? p.name : null, idempotencyKey: key ?? null, requestHash: hash });
          // The key is taken: a concurrent create with it committed while this one waited.
          if (!made) throw new KeyTaken();
          return made;
        })
        .catch((err: unknown) => {
          if (err instanceof KeyTaken) return null;
          throw err;
        });
      if (!s) {
        const seen = await sweepOfKey(db, projectId, key!);
        if (!seen) throw new DomainError('unavailable', 'a concurrent request with the same Idempotency-Key did not finish; try again');
        return replayCreate(reply, seen, hash!);
      }
      await startOrLeave(s, req.log);
      return reply.status(201).send(await detail(s));
    },
  );

  app.get(
    '/sweeps',
    { schema: { tags: ['sweeps'], summary: 'Sweeps, newest first (the 200 newest)', querystring: SweepListQuery, response: { 200: SweepListSchema } } },
    async (req) => {
      const projectIds = await visibleProjectIds(db, req);
      let projectId: string | undefined;
      if (req.query.project) {
        if (projectIds && req.principal && !allows(req.principal, req.query.project, false)) throw forbidden(`this token may not read project "${req.query.project}"`);
        projectId = await findProjectId(db, req.query.project);
        if (!projectId) return { sweeps: [] };
      }
      const rows = await listSweeps(db, { projectIds, projectId, limit: 200 });
      const ids = rows.map((s) => s.id);
      const [names, counts] = await Promise.all([sweepScopeNames(db, ids), trialCounts(db, ids)]);
      return { sweeps: rows.map((s) => sweepJson(s, names.get(s.id) ?? { project: null, experiment: null }, counts.get(s.id))) };
    },
  );

  app.get(
    '/sweeps/:id',
    { schema: { tags: ['sweeps'], summary: "A sweep with its leaderboard of trials and its best trial (with the best checkpoint of the trials' runs)", params: IdParams, response: { 200: SweepDetailSchema, ...NotFound } } },
    async (req) => {
      const s = await getSweep(db, req.params.id);
      if (!s) throw notFound('sweep', req.params.id);
      return detail(s);
    },
  );

  app.post(
    '/sweeps/:id/cancel',
    {
      schema: {
        tags: ['sweeps'],
        summary: 'Cancel a sweep: its trials that have not ended are cancelled, and no more start',
        params: IdParams,
        body: CancelSweepBody,
        response: { 202: SweepSchema, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const s = await getSweep(db, req.params.id);
      if (!s) throw notFound('sweep', req.params.id);
      if (s.state !== 'RUNNING') throw new DomainError('conflict', `sweep ${s.id} already ended ${s.state}; nothing to cancel`);
      // No workflow running (terminated in the Temporal UI, say): it is started again, and takes the cancel at once.
      if (!(await signalCancelSweep(client, s.id, req.body?.reason))) {
        await startSweepWorkflow(client, s, sweepStart);
        await signalCancelSweep(client, s.id, req.body?.reason);
      }
      const [names, counts] = await Promise.all([sweepScopeNames(db, [s.id]), trialCounts(db, [s.id])]);
      return reply.status(202).send(sweepJson(s, names.get(s.id) ?? { project: null, experiment: null }, counts.get(s.id)));
    },
  );

  app.get(
    '/runs/:id/rung-verdict',
    {
      schema: {
        tags: ['sweeps'],
        summary: "An ASHA trial's verdict at the rung its step reached: continue, stop or pending (the SDK waits for it at each rung)",
        params: IdParams,
        querystring: RungVerdictQuery,
        response: { 200: RungVerdictSchema, ...NotFound },
      },
    },
    async (req) => {
      const run = await runOrNotFound(db, req.params.id);
      const trial = await ashaSweepOfRun(db, run.id);
      // Not a trial of a running asha sweep: nothing to wait for.
      if (!trial) return { decision: 'continue' as const, rung: null, step: null, reason: null };
      const step = Number(req.query.step);
      const deadline = Date.now() + Number(req.query.wait_s ?? 10) * 1000;
      for (;;) {
        // The trial's metric write woke the sweep (api/sweep-waker.ts): the verdict is usually there within a workflow task.
        const v = await queryTrialVerdict(client, trial.sweepId, trial.jobId, step);
        if (v?.decision === 'continue') return { decision: 'continue' as const, rung: null, step: null, reason: null };
        if (v?.decision === 'stop') return { decision: 'stop' as const, rung: v.rung, step: v.step, reason: v.reason };
        if (Date.now() >= deadline) return { decision: 'pending' as const, rung: v?.rung ?? null, step: v?.step ?? null, reason: null };
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  );
};
