/**
 * GET /jobs/:id/attempts/:attempt/launch: what the control plane dispatched, for the agent about
 * to start the attempt. The agent starts a process only when the task it took from Temporal
 * says the same (node, cards, command, working dir, env, run, watched folder): Temporal takes
 * tasks from anyone who can reach it, the database only from the control plane. The answer
 * also carries the values of the job's secret variables, which travel nowhere else.
 *
 * Only a node token of the node the attempt was dispatched to gets it (api/auth/auth.ts), and only
 * while the attempt is DISPATCHING or RUNNING; nobody else, admins included.
 *
 * POST /jobs/:id/attempts/:attempt/started: the same agent reports that the process is up, and
 * the attempt is RUNNING (one request, where a Temporal signal to the job's workflow cost a
 * workflow task and a local activity).
 *
 * POST /jobs/:id/attempts/:attempt/events: what the node's checkpoint watcher skipped (symbolic
 * links) or refused, as the attempt's events: the user reads why a checkpoint was not registered.
 */
import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { markAttemptRunning } from '../../db/queries/attempt-started.ts';
import { runOfAttempt } from '../../db/queries/attempt-run.ts';
import { jobSecretValues } from '../../db/queries/job-secrets.ts';
import { masterPortRead, nodeAddresses } from '../../db/queries/gangs.ts';
import { getJob } from '../../db/queries/jobs.ts';
import { addEvent } from '../../db/queries/runs.ts';
import type { Db } from '../../db/client.ts';
import type { GangPlacement } from '../../db/schema.ts';
import { attemptStateAndNode } from '../../db/queries/launch.ts';
import { attemptFenced } from '../../db/queries/peers.ts';
import type { ApiDeps } from '../deps.ts';
import { artifactFiles } from '../mlflow/artifact-files.ts';
import { pythonEnvArtifact, PYTHON_ENV_ARTIFACT } from '../python-env.ts';
import { DomainError, fencedAttempt, notFound } from '../errors.ts';
import { Conflict, NotFound, Nullable, StringMap } from '../schemas/common.ts';

const Params = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }), attempt: Type.String({ pattern: '^[1-9][0-9]{0,6}$' }) });
export const LaunchSchema = Type.Object({
  node_id: Type.String(),
  run_id: Nullable(Type.String()),
  command: Type.Array(Type.String()),
  working_dir: Type.String(),
  env: StringMap,
  gpu_indices: Type.Array(Type.Integer()),
  watch_dir: Nullable(Type.String()),
  secret_env: StringMap,
  code: Type.Optional(Nullable(Type.Object({ key: Type.String(), sha256: Type.String() }, { description: "the job's code snapshot, which the node unpacks into working_dir; null: none" }))),
  image: Type.Optional(Nullable(Type.String({ description: "the job's container image, which the node's podman runs the command in; null: none" }))),
  gang: Nullable(
    Type.Object({
      rank: Type.Integer({ description: "the asking node's rank" }),
      master_port: Type.Integer(),
      members: Type.Array(Type.Object({ node_id: Type.String(), address: Type.String(), gpu_indices: Type.Array(Type.Integer()) }), { description: 'every member in rank order' }),
    }, { description: 'a multi-node job: what this member is told of the gang; null for a single-node job' }),
  ),
});

export const StartedBody = Type.Object(
  {
    pid: Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1, description: 'pid of the process the agent started (its shim, leader of the process group)' }),
    log_path: Type.String({ minLength: 1, maxLength: 4096, description: "where the node writes the attempt's stdout" }),
  },
  { additionalProperties: false },
);
export const NodeEventBody = Type.Object(
  {
    kind: Type.Union([Type.Literal('checkpoint.skipped'), Type.Literal('checkpoint.watcher'), Type.Literal('checkpoint.stored'), Type.Literal('checkpoint.fetched'), Type.Literal('code.fetched'), Type.Literal('env.built'), Type.Literal('image.pulled')], {
      description: "what the node's checkpoint watcher saw, or its upload of a checkpoint to the plane's store, its fetch of a resume point from it, its fetch of the job's code, its build of the job's Python environment or the cache's copy of it, and its pull of the job's image (the time it took, or why not)",
    }),
    level: Type.Union([Type.Literal('info'), Type.Literal('warning')]),
    message: Type.String({ minLength: 1, maxLength: 10_000 }),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);

export const StartedSchema = Type.Object({ state: Type.String({ description: "the attempt's state after the report: RUNNING, or the state it had already moved on to" }) });

/** A gang attempt's rendezvous as the database holds it (the port beginAttempt picked, the nodes' addresses). */
async function gangLaunch(db: Db, jobId: string, attempt: number, members: GangPlacement[]) {
  const port = await masterPortRead(db, jobId, attempt);
  const addresses = await nodeAddresses(db, members.map((m) => m.node_id));
  return { master_port: port ?? 0, members: members.map((m) => ({ node_id: m.node_id, address: addresses.get(m.node_id) ?? m.node_id, gpu_indices: m.gpu_indices })) };
}

export const launchRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, store, artifactsDir }) => {
  const artifacts = artifactFiles({ store: store ?? null, dir: artifactsDir ?? null });
  app.get(
    '/jobs/:id/attempts/:attempt/launch',
    {
      schema: {
        tags: ['jobs'],
        summary: 'What was dispatched for a live attempt, and its secret variables: for the agent of the node it was dispatched to (node tokens only)',
        params: Params,
        response: { 200: LaunchSchema, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const { id } = req.params;
      const attempt = Number(req.params.attempt);
      const a = await attemptStateAndNode(db, id, attempt);
      if (!a) throw notFound('attempt', `${id}#${attempt}`);
      const job = await getJob(db, id);
      const live = (a.state === 'DISPATCHING' || a.state === 'RUNNING') && job?.attempt === attempt && job.nodeId === a.nodeId;
      if (!job || !live || !job.nodeId || !job.gpuIndices) throw new DomainError('conflict', `attempt ${id}#${attempt} is ${a.state}: only a live attempt is launched`);
      // A gang's member is the one on the asking node (auth let only its members' nodes in).
      const asking = req.principal?.kind === 'node' ? req.principal.nodeId : null;
      const rank = job.members ? job.members.findIndex((m) => m.node_id === asking) : 0;
      if (rank < 0) throw new DomainError('conflict', `attempt ${id}#${attempt} has no member on node ${asking}`);
      const gang = job.members ? await gangLaunch(db, id, attempt, job.members) : null;
      const runId = await runOfAttempt(db, id, attempt);
      const secretEnv = await jobSecretValues(db, id);
      reply.header('cache-control', 'no-store');
      const member = job.members ? job.members[rank] : { node_id: job.nodeId, gpu_indices: job.gpuIndices };
      return {
        node_id: member.node_id,
        run_id: runId,
        command: job.command,
        working_dir: job.workingDir,
        env: job.env,
        gpu_indices: member.gpu_indices,
        watch_dir: job.watchDir,
        secret_env: secretEnv,
        code: job.code ? { key: job.code.key, sha256: job.code.sha256 } : null,
        image: job.image ?? null,
        gang: gang ? { ...gang, rank } : null,
      };
    },
  );

  app.post(
    '/jobs/:id/attempts/:attempt/started',
    {
      schema: {
        tags: ['jobs'],
        summary: "The attempt's process is up: DISPATCHING → RUNNING (node tokens of the node it was dispatched to only)",
        params: Params,
        body: StartedBody,
        response: { 200: StartedSchema, ...NotFound, ...Conflict },
      },
    },
    async (req) => {
      const { id } = req.params;
      const attempt = Number(req.params.attempt);
      const { pid, log_path: logPath } = req.body;
      return db.transaction(async (tx) => {
        const nodeId = req.principal?.kind === 'node' ? req.principal.nodeId : undefined;
        if (await attemptFenced(tx, id, attempt)) throw fencedAttempt(id, attempt);
        if (await markAttemptRunning(tx, { jobId: id, attempt, pid, logPath, nodeId })) return { state: 'RUNNING' };
        const job = await getJob(tx, id);
        if (!job) throw notFound('job', id);
        // A report sent twice, or one that arrives after the exit was recorded: nothing to change.
        if (job.attempt === attempt) return { state: job.state };
        throw new DomainError('conflict', `attempt ${id}#${attempt} is not the job's current attempt (${job.attempt})`);
      });
    },
  );

  app.post(
    '/jobs/:id/attempts/:attempt/events',
    {
      schema: {
        tags: ['jobs'],
        summary: "An event the attempt's node saw (its checkpoint watcher skipped or refused something), into the attempt's history (node tokens of the node it was dispatched to only)",
        params: Params,
        body: NodeEventBody,
        response: { 201: Type.Object({ id: Type.Integer() }), ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const { id } = req.params;
      const attempt = Number(req.params.attempt);
      if (!(await attemptStateAndNode(db, id, attempt))) throw notFound('attempt', `${id}#${attempt}`);
      if (await attemptFenced(db, id, attempt)) throw fencedAttempt(id, attempt);
      const b = req.body;
      const runId = await runOfAttempt(db, id, attempt);
      const e = await addEvent(db, { runId, jobId: id, attempt, kind: b.kind, level: b.level, message: b.message, data: b.data ?? null });
      // The run's record of its Python environment, as a file MLflow's clients and the console list with its artifacts.
      const envFile = b.kind === 'env.built' && runId ? pythonEnvArtifact(b.data) : null;
      if (envFile && artifacts) {
        await artifacts.write(runId!, PYTHON_ENV_ARTIFACT, Readable.from([envFile])).catch((err: unknown) => req.log.warn({ err, runId }, 'could not keep the run\'s python-env artifact'));
      }
      return reply.status(201).send({ id: e.id });
    },
  );
};
