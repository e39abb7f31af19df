/**
 * Who may call what: every route under /api/v1 has a rule in RULES (api/auth/auth.ts refuses to
 * start the app with a route that has none, and checks the rules on each request), and each
 * rule names how to find the project a request touches.
 */
import type { FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { projectOfCheckpoint, projectOfEvaluation, projectOfJob, projectOfRun } from '../../db/queries/auth.ts';
import { projectOfSweep } from '../../db/queries/sweeps.ts';
import { projectOfWebhook } from '../../db/queries/webhooks.ts';
import { forbidden } from '../errors.ts';
import { compareRunIds } from '../id-list.ts';

export type Params = Record<string, string>;
/** Before validation a repeated query key is an array: the resolvers see only single strings. */
export type Query = Record<string, string | string[] | undefined>;
const one = (v: string | string[] | undefined): string | undefined | false => (Array.isArray(v) ? false : v);
export type Body = Record<string, unknown> | undefined;

/**
 * A resource a request names by id: what it is and its id (a refusal reads exactly as the
 * handler's 404 for an unknown id), and its project: a name, null for none, undefined when there
 * is no such resource.
 */
export interface Touched {
  what: string;
  id: string;
  project: string | null | undefined;
}
/**
 * What a request touches: resources named by id (a caller that may not read one gets the 404 of
 * an unknown id, so an id of another project is not confirmed to exist), or a project named by
 * name (a string; null for no project), which is refused with 403 whether or not it exists.
 */
type ProjectOf = (db: Db, req: { params: Params; query: Query; body: Body }) => Promise<string | null | undefined | Touched[]>;

export interface Rule {
  /** open: no token; any: any user token (lists filter by visibleProjects); admin: admins only; read/write: on `project`; node: node tokens only (nodeAttempt). */
  access: 'open' | 'any' | 'admin' | 'read' | 'write' | 'node';
  project?: ProjectOf;
  /** A run token may call it for its own run (the run id is `runOf`). */
  runOf?: (req: { params: Params }) => string;
  /** Any principal (node and run tokens too) may call it. */
  everyone?: boolean;
  /** The project is named in the body: checked once the body is parsed and validated. */
  fromBody?: boolean;
  /** A node token may call it for its own node (the node id is `nodeSelf`). */
  nodeSelf?: (req: { params: Params }) => string;
  /** A node token may call it for attempts dispatched to its node. */
  nodeAttempt?: (req: { params: Params; query: Query }) => { jobId: string; attempt: number | null };
}

/** The resource `what` with this id and its project, read by `lookup`. */
const touched = async (what: string, id: string, lookup: (db: Db, id: string) => Promise<string | null | undefined>, db: Db): Promise<Touched> => ({ what, id, project: await lookup(db, id) });
const byJob: ProjectOf = async (db, r) => [await touched('job', r.params.id, projectOfJob, db)];
const byRun: ProjectOf = async (db, r) => [await touched('run', r.params.id, projectOfRun, db)];
const byCheckpoint: ProjectOf = async (db, r) => [await touched('checkpoint', r.params.id, projectOfCheckpoint, db)];
const byEvaluation: ProjectOf = async (db, r) => [await touched('evaluation', r.params.id, projectOfEvaluation, db)];
const byWebhook: ProjectOf = async (db, r) => [await touched('webhook', r.params.id, projectOfWebhook, db)];
const bySweep: ProjectOf = async (db, r) => [await touched('sweep', r.params.id, projectOfSweep, db)];
const byParam: ProjectOf = async (_db, r) => r.params.project;
const byBodyProject: ProjectOf = async (_db, r) => (typeof r.body?.project === 'string' ? r.body.project : null);
/** ?run= or ?checkpoint= (lineage). */
const byLineage: ProjectOf = async (db, r) => {
  const run = one(r.query.run);
  const checkpoint = one(r.query.checkpoint);
  if (run === false || checkpoint === false) return undefined;
  if (run) return [await touched('run', run, projectOfRun, db)];
  return checkpoint ? [await touched('checkpoint', checkpoint, projectOfCheckpoint, db)] : null;
};
/** ?run= or ?project= (checkpoint listings, best). */
// A repeated key (false) is left to validation, which refuses it: undefined here.
const byScope: ProjectOf = async (db, r) => {
  const run = one(r.query.run);
  const project = one(r.query.project);
  if (run === false || project === false) return undefined;
  return run ? [await touched('run', run, projectOfRun, db)] : (project ?? null);
};
/** ?job= (the runs of a job): an unknown or unreadable job is a 404; without it the list keeps to the projects the caller may read. */
const byJobFilter: ProjectOf = async (db, r) => {
  const job = one(r.query.job);
  return job ? [await touched('job', job, projectOfJob, db)] : undefined;
};
const byQueryProject: ProjectOf = async (_db, r) => {
  const project = one(r.query.project);
  return project === false ? undefined : (project ?? null);
};
/** Every run of ?runs=, read as the handler reads it (api/id-list.ts): all of them are checked. */
const byRuns: ProjectOf = async (db, r) => Promise.all(compareRunIds(r.query.runs).map((id) => touched('run', id, projectOfRun, db)));
const ownRun = (r: { params: Params }) => r.params.id;
const logAttempt = (r: { params: Params; query: Query }) => {
  const q = one(r.query.attempt);
  return { jobId: r.params.id, attempt: r.params.attempt ? Number(r.params.attempt) : q ? Number(q) : null };
};

/** Every route under /api/v1, by method and path. */
const RULES: Record<string, Rule> = {
  'GET /api/v1/health': { access: 'open' },
  'GET /api/v1/openapi.json': { access: 'open' },
  'GET /api/v1/console': { access: 'open' },
  'GET /api/v1/whoami': { access: 'any', everyone: true },
  'GET /api/v1/stream': { access: 'any' },
  'GET /api/v1/nodes': { access: 'any' },
  'GET /api/v1/nodes/:id': { access: 'any' },
  'POST /api/v1/nodes/:id/drain': { access: 'admin' },
  'POST /api/v1/nodes/:id/resume': { access: 'admin' },
  'DELETE /api/v1/nodes/:id': { access: 'admin' },
  // A node's telemetry: its agent's report, with its node token (an admin's too).
  'POST /api/v1/nodes/:id/telemetry': { access: 'admin', nodeSelf: (r) => r.params.id },
  // A node's Python environments: its agent reports them with its node token (an admin's too); admins read them.
  'PUT /api/v1/nodes/:id/envs': { access: 'admin', nodeSelf: (r) => r.params.id },
  'GET /api/v1/nodes/:id/envs': { access: 'admin' },
  // A node's peer report (issue 46): its agent's, with its node token, once a second.
  'POST /api/v1/nodes/:id/peers': { access: 'admin', nodeSelf: (r) => r.params.id },
  'POST /api/v1/tokens': { access: 'admin' },
  'GET /api/v1/tokens': { access: 'admin' },
  'PUT /api/v1/projects/:project/quota': { access: 'admin' },
  'DELETE /api/v1/projects/:project/quota': { access: 'admin' },
  // Lines of the projects the caller may read only (api/routes/quotas.ts).
  'GET /api/v1/quotas': { access: 'any' },
  // Projects with their job identities: the ones the caller may read (api/routes/project-users.ts); mapping one to a user is an admin's.
  'GET /api/v1/projects': { access: 'any' },
  'PUT /api/v1/projects/:project/job-user': { access: 'admin' },
  'DELETE /api/v1/projects/:project/job-user': { access: 'admin' },
  'DELETE /api/v1/tokens/:id': { access: 'admin' },

  'POST /api/v1/jobs': { access: 'write', project: byBodyProject, fromBody: true },
  'GET /api/v1/jobs': { access: 'any' },
  'GET /api/v1/jobs/counts': { access: 'any' },
  'GET /api/v1/jobs/:id': { access: 'read', project: byJob },
  'POST /api/v1/jobs/:id/retry': { access: 'write', project: byJob },
  'POST /api/v1/jobs/:id/cancel': { access: 'write', project: byJob },
  'GET /api/v1/jobs/:id/events': { access: 'read', project: byJob },
  'GET /api/v1/jobs/:id/logs': { access: 'read', project: byJob },
  'GET /api/v1/jobs/:id/logs/refs': { access: 'read', project: byJob, nodeAttempt: logAttempt },
  // Logs are what a node saw its process print: its node (and an admin) write them, no user.
  'POST /api/v1/jobs/:id/attempts/:attempt/logs/:stream': { access: 'admin', nodeAttempt: logAttempt },
  'GET /api/v1/jobs/:id/attempts/:attempt/launch': { access: 'node', nodeAttempt: logAttempt },
  'POST /api/v1/jobs/:id/attempts/:attempt/started': { access: 'node', nodeAttempt: logAttempt },
  // What the node's checkpoint watcher skipped or refused, into the attempt's history.
  'POST /api/v1/jobs/:id/attempts/:attempt/events': { access: 'node', nodeAttempt: logAttempt },
  // Its node's upload of one of the attempt's checkpoints to the plane's store (api/routes/checkpoint-stored.ts).
  'POST /api/v1/jobs/:id/attempts/:attempt/checkpoints/stored': { access: 'node', nodeAttempt: logAttempt },
  // An agent starting again: its node's checkpoints still to be stored (an admin's too).
  'GET /api/v1/nodes/:id/checkpoints/pending': { access: 'admin', nodeSelf: (r) => r.params.id },

  // Code snapshots of a project (api/routes/code.ts): asked for and uploaded by those who submit its jobs; an attempt's, by its node.
  'GET /api/v1/code/:sha256': { access: 'write', project: byQueryProject },
  'PUT /api/v1/code/:sha256': { access: 'write', project: byQueryProject },
  'GET /api/v1/jobs/:id/attempts/:attempt/code': { access: 'node', nodeAttempt: logAttempt },
  // A node's sweep of its unpacked code: which of its jobs' folders may go (an admin may ask too).
  'POST /api/v1/nodes/:id/code-workdirs/expired': { access: 'admin', nodeSelf: (r) => r.params.id },

  // A sweep's trials are jobs of its project: creating one is submitting them.
  'POST /api/v1/sweeps': { access: 'write', project: byBodyProject, fromBody: true },
  'GET /api/v1/sweeps': { access: 'any' },
  'GET /api/v1/sweeps/:id': { access: 'read', project: bySweep },
  'POST /api/v1/sweeps/:id/cancel': { access: 'write', project: bySweep },
  'GET /api/v1/runs/:id/rung-verdict': { access: 'read', project: byRun, runOf: ownRun },

  'GET /api/v1/runs/counts': { access: 'any' },
  'POST /api/v1/runs': { access: 'write', project: byBodyProject, fromBody: true },
  // Any user token: the list keeps to the projects it may read (api/routes/runs.ts), and a
  // ?job= it may not read answers that job's 404.
  'GET /api/v1/runs': { access: 'read', project: byJobFilter },
  'GET /api/v1/runs/:id': { access: 'read', project: byRun, runOf: ownRun },
  'PATCH /api/v1/runs/:id': { access: 'write', project: byRun, runOf: ownRun },
  'POST /api/v1/runs/:id/heartbeat': { access: 'write', project: byRun, runOf: ownRun },
  'POST /api/v1/runs/:id/finish': { access: 'write', project: byRun, runOf: ownRun },
  'POST /api/v1/runs/:id/metrics': { access: 'write', project: byRun, runOf: ownRun },
  'GET /api/v1/runs/:id/metrics': { access: 'read', project: byRun, runOf: ownRun },
  'POST /api/v1/runs/:id/events': { access: 'write', project: byRun, runOf: ownRun },
  'GET /api/v1/runs/:id/events': { access: 'read', project: byRun, runOf: ownRun },
  'GET /api/v1/runs/:id/logs': { access: 'read', project: byRun },
  'GET /api/v1/metrics/compare': { access: 'read', project: byRuns },

  'GET /api/v1/primary-metric': { access: 'read', project: byQueryProject },
  'GET /api/v1/projects/:project/stall-after': { access: 'read', project: byParam },
  'PUT /api/v1/projects/:project/stall-after': { access: 'write', project: byParam },
  'DELETE /api/v1/projects/:project/stall-after': { access: 'write', project: byParam },
  'PUT /api/v1/projects/:project/primary-metric': { access: 'write', project: byParam },
  'DELETE /api/v1/projects/:project/primary-metric': { access: 'write', project: byParam },
  'PUT /api/v1/projects/:project/experiments/:experiment/primary-metric': { access: 'write', project: byParam },
  'DELETE /api/v1/projects/:project/experiments/:experiment/primary-metric': { access: 'write', project: byParam },
  'GET /api/v1/projects/:project/experiments/:experiment/retention': { access: 'read', project: byParam },
  'PUT /api/v1/projects/:project/experiments/:experiment/retention': { access: 'write', project: byParam },

  'GET /api/v1/checkpoints': { access: 'read', project: byScope },
  'GET /api/v1/checkpoints/best': { access: 'read', project: byScope },
  'GET /api/v1/checkpoints/:id': { access: 'read', project: byCheckpoint },
  'GET /api/v1/checkpoints/:id/download': { access: 'read', project: byCheckpoint },
  'POST /api/v1/checkpoints/:id/evaluations': { access: 'write', project: byCheckpoint },
  'GET /api/v1/checkpoints/:id/evaluations': { access: 'read', project: byCheckpoint },
  // A fork into another project also needs write access there (api/routes/fork.ts).
  'POST /api/v1/checkpoints/:id/fork': { access: 'write', project: byCheckpoint },
  // Into a model of the checkpoint's own project (api/routes/checkpoint-register.ts).
  'POST /api/v1/checkpoints/:id/register': { access: 'write', project: byCheckpoint },
  'GET /api/v1/lineage': { access: 'read', project: byLineage },
  'GET /api/v1/evaluations/:id': { access: 'read', project: byEvaluation },

  // Admins, or members for their projects (a webhook of every project: tokens of all projects).
  'POST /api/v1/webhooks': { access: 'write', project: byBodyProject, fromBody: true },
  // Only the webhooks the caller may manage (api/routes/webhooks.ts).
  'GET /api/v1/webhooks': { access: 'any' },
  'DELETE /api/v1/webhooks/:id': { access: 'write', project: byWebhook },
  'POST /api/v1/webhooks/:id/test': { access: 'write', project: byWebhook },
};

export function ruleKey(method: string, url: string): string {
  return `${method} ${url}`;
}

/** Whether a route (method and path, as registered) has a rule. */
export function hasRule(method: string, url: string): boolean {
  return RULES[ruleKey(method, url)] !== undefined;
}

/** The rule of a request's route: undefined when no route matched (the not-found handler answers). */
export function ruleOf(req: FastifyRequest): Rule | undefined {
  const url = req.routeOptions.url;
  if (!url) return undefined; // no route: the not-found handler answers
  const rule = RULES[ruleKey(req.method === 'HEAD' ? 'GET' : req.method, url)];
  if (!rule) throw forbidden(`no access rule for ${req.method} ${url}`);
  return rule;
}
