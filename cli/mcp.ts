/**
 * `gpuctl mcp`: GPUPlane's tools for AI agents, an MCP server over stdio (the official SDK,
 * @modelcontextprotocol/sdk). Each tool is a thin call of the API with the caller's token, so a
 * viewer's token reads and a refused call comes back as the tool's error result, never a crash.
 * Input schemas are the API's own TypeBox schemas (JSON Schema as they are). docs/mcp.md.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Type, type TObject } from '@sinclair/typebox';
import { StartEvaluationBody } from '../api/schemas/evaluations.ts';
import { ForkBody, LineageQuery } from '../api/schemas/fork.ts';
import { ListJobsQuery, RetryBody, SubmitJobBody } from '../api/schemas/jobs.ts';
import { CancelSweepBody, SweepListQuery, SweepSpecSchema } from '../api/schemas/sweeps.ts';
import type { SweepSpec } from '../domain/sweep-spec.ts';
import { bestCheckpoint, listCheckpoints } from './client-checkpoints.ts';
import { startEvaluation } from './client-evaluations.ts';
import { forkCheckpoint, lineage } from './client-fork.ts';
import { readLogs } from './client-logs.ts';
import { listRuns, runMetrics } from './client-runs.ts';
import { cancelSweep, createSweep, getSweep, listSweeps } from './client-sweeps.ts';
import { ApiError, type GpuplaneClient } from './client.ts';

const VERSION = '0.1.0';
/** The most of a log a tool answers with: its end. */
const LOG_TAIL_MAX = 64 * 1024;

const Id = (what: string) => Type.String({ minLength: 1, description: `the ${what}'s id` });
const Scope = Type.Object(
  {
    run: Type.Optional(Type.String({ minLength: 1, description: 'a run id' })),
    project: Type.Optional(Type.String({ minLength: 1 })),
    experiment: Type.Optional(Type.String({ minLength: 1, description: 'with project' })),
  },
  { additionalProperties: false },
);

interface Tool {
  description: string;
  input: TObject;
  call(c: GpuplaneClient, a: Record<string, unknown>): Promise<unknown>;
}

/** A retried tool call that creates something sends the same key, and gets the same thing back. */
const IdempotencyKey = Type.Optional(
  Type.String({ minLength: 1, maxLength: 200, description: 'any 1 to 200 printable ASCII characters; a call retried with the same key answers what the first made (default: a fresh key each call)' }),
);

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
const omit = (o: Record<string, unknown>, k: string) => Object.fromEntries(Object.entries(o).filter(([x]) => x !== k));

/** The tools, by name. */
export const TOOLS: Record<string, Tool> = {
  submit_job: {
    description: 'Submit a job (TRAIN, EVALUATE or CUSTOM): command, gpus, project, experiment, params, env, selector… Returns the job.',
    // The API's body (its experiment-needs-project rule too), and the key a retried call sends again.
    input: Type.Object({ ...SubmitJobBody.properties, idempotency_key: IdempotencyKey }, { additionalProperties: false, if: { required: ['experiment'] }, then: { required: ['project'] } }),
    call: (c, a) => c.submit(omit(a, 'idempotency_key') as never, str(a.idempotency_key)),
  },
  get_job: {
    description: 'A job with its attempts (state, node, cards, exit code, reason) and its state history.',
    input: Type.Object({ id: Id('job') }, { additionalProperties: false }),
    call: (c, a) => c.job(String(a.id)),
  },
  list_jobs: {
    description: 'Jobs, newest first, optionally by state, type or project.',
    input: Type.Object({ ...ListJobsQuery.properties, limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })) }, { additionalProperties: false }),
    call: (c, a) => c.jobs({ state: str(a.state), type: str(a.type), project: str(a.project), parent: str(a.parent), limit: num(a.limit) }),
  },
  cancel_job: {
    description: 'Cancel a job: its process gets SIGTERM, then SIGKILL after the grace.',
    input: Type.Object({ id: Id('job'), reason: Type.Optional(Type.String({ maxLength: 500 })) }, { additionalProperties: false }),
    call: (c, a) => c.cancel(String(a.id), str(a.reason)),
  },
  retry_job: {
    description: 'Retry a FAILED, CANCELLED or LOST job as its next attempt (same id), with optional edits to its config (command, env, params, gpus…).',
    input: Type.Object({ id: Id('job'), ...RetryBody.properties }, { additionalProperties: false }),
    call: (c, a) => c.retry(String(a.id), omit(a, 'id') as never),
  },
  get_logs: {
    description: "The end of a job's (or a run's) log: stdout and stderr interleaved; `attempt` and `rank` pick an attempt and a gang member.",
    input: Type.Object(
      {
        id: Type.String({ minLength: 1, description: 'a job id, or a run id' }),
        attempt: Type.Optional(Type.Integer({ minimum: 1 })),
        rank: Type.Optional(Type.Integer({ minimum: 0 })),
        tail_bytes: Type.Optional(Type.Integer({ minimum: 1, maximum: LOG_TAIL_MAX, description: `default and most: ${LOG_TAIL_MAX}` })),
      },
      { additionalProperties: false },
    ),
    call: async (c, a) => {
      const text = await readLogs(c, String(a.id), { attempt: num(a.attempt), rank: num(a.rank) });
      const tail = num(a.tail_bytes) ?? LOG_TAIL_MAX;
      return text.length > tail ? `…${text.slice(-tail)}` : text;
    },
  },
  list_runs: {
    description: 'Runs (one per attempt of a TRAIN or EVALUATE job, and SDK/MLflow runs), newest first.',
    input: Type.Object(
      {
        project: Type.Optional(Type.String({ minLength: 1 })),
        experiment: Type.Optional(Type.String({ minLength: 1, description: 'with project' })),
        job: Type.Optional(Type.String({ minLength: 1, description: "a job id: its attempts' runs" })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
      },
      { additionalProperties: false },
    ),
    call: (c, a) => listRuns(c, { project: str(a.project), experiment: str(a.experiment), job: str(a.job), limit: num(a.limit) }),
  },
  get_metrics: {
    description: "A run's metric series, downsampled to at most `points` min/max/mean buckets per key (default 100).",
    input: Type.Object(
      {
        run_id: Id('run'),
        keys: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 50 })),
        points: Type.Optional(Type.Integer({ minimum: 2, maximum: 2000 })),
      },
      { additionalProperties: false },
    ),
    call: (c, a) => runMetrics(c, String(a.run_id), { keys: Array.isArray(a.keys) ? (a.keys as string[]) : undefined, points: num(a.points) ?? 100 }),
  },
  list_checkpoints: {
    description: 'Checkpoints of a run or a project (and experiment), with their evaluated and training-time values of the primary metric.',
    input: Type.Object({ ...Scope.properties, limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })) }, { additionalProperties: false }),
    call: (c, a) => listCheckpoints(c, { run: str(a.run), project: str(a.project), experiment: str(a.experiment), limit: num(a.limit) }),
  },
  get_best_checkpoint: {
    description: 'The best checkpoint of a run or a project (and experiment) by its primary metric: evaluated values first.',
    input: Scope,
    call: (c, a) => bestCheckpoint(c, { run: str(a.run), project: str(a.project), experiment: str(a.experiment) }),
  },
  evaluate_checkpoint: {
    description: "Evaluate a checkpoint: an EVALUATE job with the training job's settings unless given. Returns the evaluation.",
    input: Type.Object({ checkpoint_id: Id('checkpoint'), ...StartEvaluationBody.properties }, { additionalProperties: false }),
    call: (c, a) => startEvaluation(c, String(a.checkpoint_id), omit(a, 'checkpoint_id') as never),
  },
  fork_checkpoint: {
    description:
      "Fork a checkpoint: a new TRAIN job that resumes from it, with the config of the attempt that registered it edited as retry_job edits one (command, env, params, gpus…). Returns the job with forked_from and what the edits changed.",
    input: Type.Object({ checkpoint_id: Id('checkpoint'), ...ForkBody.properties, idempotency_key: IdempotencyKey }, { additionalProperties: false }),
    call: (c, a) => forkCheckpoint(c, String(a.checkpoint_id), omit(omit(a, 'checkpoint_id'), 'idempotency_key') as never, str(a.idempotency_key)),
  },
  get_lineage: {
    description: 'The lineage tree of a run or a checkpoint: the runs forked from one another, each with the checkpoint it was forked from.',
    input: LineageQuery,
    // Whichever of the two is given (the API answers for neither or both).
    call: (c, a) => lineage(c, Object.fromEntries(['run', 'checkpoint'].flatMap((k) => (str(a[k]) === undefined ? [] : [[k, str(a[k])]]))) as never),
  },
  create_sweep: {
    description:
      "Create a sweep: trials of a command over parameters (grid, random or asha), each a TRAIN job with its values in GPUPLANE_PARAMS, judged by one metric; asha stops the worse trials at each rung. The input is a sweep file as JSON (docs/sweeps.md). Returns the sweep with its trials.",
    input: Type.Object({ ...SweepSpecSchema.properties, idempotency_key: IdempotencyKey }, { additionalProperties: false, description: SweepSpecSchema.description }),
    call: (c, a) => createSweep(c, omit(a, 'idempotency_key') as unknown as SweepSpec, str(a.idempotency_key)),
  },
  get_sweep: {
    description: 'A sweep: its state, trial counts, the best trial so far, and each trial (its values, job, run, state, last value, and why it was stopped).',
    input: Type.Object({ id: Id('sweep') }, { additionalProperties: false }),
    call: (c, a) => getSweep(c, String(a.id)),
  },
  list_sweeps: {
    description: 'Sweeps, newest first, optionally of one project.',
    input: SweepListQuery,
    call: (c, a) => listSweeps(c, str(a.project)),
  },
  cancel_sweep: {
    description: 'Cancel a sweep: no trial starts any more, and its running trials are cancelled.',
    input: Type.Object({ id: Id('sweep'), ...(CancelSweepBody.properties ?? {}) }, { additionalProperties: false }),
    call: (c, a) => cancelSweep(c, String(a.id), str(a.reason)),
  },
  list_nodes: {
    description: 'GPU nodes: status, labels, cards (free and owned), draining or quarantined.',
    input: Type.Object({}, { additionalProperties: false }),
    call: (c) => c.nodes(),
  },
};

/** A tool's answer: JSON text (or the log's text); a refused or failed call is an error result naming why. */
export async function callTool(c: GpuplaneClient, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const tool = Object.hasOwn(TOOLS, name) ? TOOLS[name] : undefined;
  if (!tool) return { isError: true, content: [{ type: 'text', text: `no tool ${name}; the tools are ${Object.keys(TOOLS).join(', ')}` }] };
  try {
    const out = await tool.call(c, args);
    return { content: [{ type: 'text', text: typeof out === 'string' ? out : JSON.stringify(out, null, 2) }] };
  } catch (err) {
    const msg = err instanceof ApiError ? `${err.message}${err.status ? ` (HTTP ${err.status})` : ''}` : (err as Error).message;
    return { isError: true, content: [{ type: 'text', text: msg }] };
  }
}

/** Serves the tools over stdio until stdin closes. */
export async function serveMcp(c: GpuplaneClient): Promise<void> {
  const server = new Server({ name: 'gpuplane', version: VERSION }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    // TypeBox schemas are JSON Schema; JSON.parse(JSON.stringify()) drops TypeBox's symbol keys.
    tools: Object.entries(TOOLS).map(([name, t]) => ({ name, description: t.description, inputSchema: JSON.parse(JSON.stringify(t.input)) as { type: 'object' } })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => callTool(c, req.params.name, req.params.arguments ?? {}));
  await server.connect(new StdioServerTransport());
  // Served until the client goes: its end of stdin closes (or it closes the session).
  await new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    server.onclose = resolve;
  });
  await server.close();
}
