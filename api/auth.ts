/**
 * Who may call what. Every route under /api/v1 has a rule in RULES (a route without one makes
 * the app refuse to start), checked in a preHandler once the params are validated, so a
 * refused request never reaches its handler and changes nothing.
 *
 * Principals (runtime/tokens.ts): an admin; a member (read and write in its projects) or a viewer
 * (read in its projects), `*` standing for every project; a node (an agent: ships logs of the
 * attempts dispatched to it); a run token (a job process: writes its own run).
 */
import { timingSafeEqual } from 'node:crypto';
import { and, eq, inArray, isNull } from 'drizzle-orm';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../db/client.ts';
import { apiTokens, checkpoints, evaluations, jobAttempts, jobs, projects, runs } from '../db/schema.ts';
import { parseRunToken, runMacValid, tokenHash } from '../runtime/tokens.ts';
import { DomainError, forbidden, unauthorized } from './errors.ts';

export type Principal =
  | { kind: 'admin'; tokenId: string | null; name: string }
  | { kind: 'user'; tokenId: string; name: string; role: 'member' | 'viewer'; projects: string[] }
  | { kind: 'node'; tokenId: string; name: string; nodeId: string }
  | { kind: 'run'; runId: string; nodeId: string };

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export interface AuthConfig {
  /** Admin tokens that need no row (GPUPLANE_ADMIN_TOKEN): an operator's bootstrap. */
  adminTokens?: string[];
  /** How long a looked-up token is trusted before it is read again (a revocation takes this long on other replicas). */
  cacheMs?: number;
}

type Params = Record<string, string>;
/** Before validation a repeated query key is an array: the resolvers see only single strings. */
type Query = Record<string, string | string[] | undefined>;
const one = (v: string | string[] | undefined): string | undefined | false => (Array.isArray(v) ? false : v);
type Body = Record<string, unknown> | undefined;

/** The project a request touches: a name, null for a resource of no project, undefined when the resource is missing (the handler answers 404). */
type ProjectOf = (db: Db, req: { params: Params; query: Query; body: Body }) => Promise<string | null | undefined | string[]>;

interface Rule {
  /** open: no token; any: any user token (lists filter by visibleProjects); admin: admins only; read/write: on `project`; node: node tokens only (nodeAttempt). */
  access: 'open' | 'any' | 'admin' | 'read' | 'write' | 'node';
  project?: ProjectOf;
  /** A run token may call it for its own run (the run id is `runOf`). */
  runOf?: (req: { params: Params }) => string;
  /** Any principal (node and run tokens too) may call it. */
  everyone?: boolean;
  /** The project is named in the body: checked once the body is parsed and validated. */
  fromBody?: boolean;
  /** A node token may call it for attempts dispatched to its node. */
  nodeAttempt?: (req: { params: Params; query: Query }) => { jobId: string; attempt: number | null };
}

async function projectName(db: Db, projectId: string | null): Promise<string | null> {
  if (!projectId) return null;
  const [p] = await db.select({ name: projects.name }).from(projects).where(eq(projects.id, projectId));
  return p?.name ?? null;
}
async function ofJob(db: Db, id: string) {
  const [j] = await db.select({ p: jobs.projectId }).from(jobs).where(eq(jobs.id, id));
  return j ? projectName(db, j.p) : undefined;
}
async function ofRun(db: Db, id: string) {
  const [r] = await db.select({ p: runs.projectId }).from(runs).where(eq(runs.id, id));
  return r ? projectName(db, r.p) : undefined;
}
async function ofCheckpoint(db: Db, id: string) {
  const [c] = await db.select({ p: runs.projectId }).from(checkpoints).innerJoin(runs, eq(runs.id, checkpoints.runId)).where(eq(checkpoints.id, id));
  return c ? projectName(db, c.p) : undefined;
}
async function ofEvaluation(db: Db, id: string) {
  const [e] = await db.select({ c: evaluations.checkpointId }).from(evaluations).where(eq(evaluations.id, id));
  return e ? ofCheckpoint(db, e.c) : undefined;
}

const byJob: ProjectOf = (db, r) => ofJob(db, r.params.id);
const byRun: ProjectOf = (db, r) => ofRun(db, r.params.id);
const byCheckpoint: ProjectOf = (db, r) => ofCheckpoint(db, r.params.id);
const byEvaluation: ProjectOf = (db, r) => ofEvaluation(db, r.params.id);
const byParam: ProjectOf = async (_db, r) => r.params.project;
const byBodyProject: ProjectOf = async (_db, r) => (typeof r.body?.project === 'string' ? r.body.project : null);
/** ?run= or ?project= (checkpoint listings, best). */
// A repeated key (false) is left to validation, which refuses it: undefined here.
const byScope: ProjectOf = async (db, r) => {
  const run = one(r.query.run);
  const project = one(r.query.project);
  if (run === false || project === false) return undefined;
  return run ? ofRun(db, run) : (project ?? null);
};
const byQueryProject: ProjectOf = async (_db, r) => {
  const project = one(r.query.project);
  return project === false ? undefined : (project ?? null);
};
const byRuns: ProjectOf = async (db, r) => {
  const runs = one(r.query.runs);
  if (runs === false) return undefined;
  const ids = (runs ?? '').split(',').filter(Boolean).slice(0, 50);
  const names: string[] = [];
  for (const id of ids) {
    const n = await ofRun(db, id);
    if (n === undefined) return undefined;
    names.push(n ?? '');
  }
  return names;
};
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
  'POST /api/v1/tokens': { access: 'admin' },
  'GET /api/v1/tokens': { access: 'admin' },
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

  'GET /api/v1/runs/counts': { access: 'any' },
  'POST /api/v1/runs': { access: 'write', project: byBodyProject, fromBody: true },
  'GET /api/v1/runs': { access: 'any' },
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
  'PUT /api/v1/projects/:project/primary-metric': { access: 'write', project: byParam },
  'DELETE /api/v1/projects/:project/primary-metric': { access: 'write', project: byParam },
  'PUT /api/v1/projects/:project/experiments/:experiment/primary-metric': { access: 'write', project: byParam },
  'DELETE /api/v1/projects/:project/experiments/:experiment/primary-metric': { access: 'write', project: byParam },
  'GET /api/v1/projects/:project/experiments/:experiment/retention': { access: 'read', project: byParam },
  'PUT /api/v1/projects/:project/experiments/:experiment/retention': { access: 'write', project: byParam },

  'GET /api/v1/checkpoints': { access: 'read', project: byScope },
  'GET /api/v1/checkpoints/best': { access: 'read', project: byScope },
  'GET /api/v1/checkpoints/:id': { access: 'read', project: byCheckpoint },
  'POST /api/v1/checkpoints/:id/evaluations': { access: 'write', project: byCheckpoint },
  'GET /api/v1/checkpoints/:id/evaluations': { access: 'read', project: byCheckpoint },
  'GET /api/v1/evaluations/:id': { access: 'read', project: byEvaluation },
};

export function ruleKey(method: string, url: string): string {
  return `${method} ${url}`;
}

/** Whether a principal may touch a project (null: a resource of no project) with this access. */
export function allows(p: Principal, project: string | null, write: boolean): boolean {
  if (p.kind === 'admin') return true;
  if (p.kind !== 'user') return false;
  if (write && p.role !== 'member') return false;
  return p.projects.includes('*') || (project !== null && p.projects.includes(project));
}

/**
 * The projects a principal sees in lists: null for all of them, else project ids (a token's
 * projects that exist). Lists of jobs and runs and their counts filter by it.
 */
export async function visibleProjectIds(db: Db, req: FastifyRequest): Promise<string[] | null> {
  const p = req.principal;
  if (!p || p.kind === 'admin' || (p.kind === 'user' && p.projects.includes('*'))) return null;
  if (p.kind !== 'user' || p.projects.length === 0) return [];
  const rows = await db.select({ id: projects.id }).from(projects).where(inArray(projects.name, p.projects));
  return rows.map((r) => r.id);
}

function describe(p: Principal): string {
  if (p.kind === 'admin') return 'an admin token';
  if (p.kind === 'user') return `${p.role} token "${p.name}" (projects: ${p.projects.join(', ') || 'none'})`;
  if (p.kind === 'node') return `the node token of ${p.nodeId}`;
  return `the run token of ${p.runId}`;
}

/** Resolves bearer tokens to principals, with a short cache (a token is read at most once per cacheMs). */
export class TokenResolver {
  private readonly cache = new Map<string, { p: Principal | null; at: number }>();
  private readonly admins: Buffer[];
  constructor(
    private readonly db: Db,
    private readonly cfg: AuthConfig,
  ) {
    this.admins = (cfg.adminTokens ?? []).filter(Boolean).map((t) => Buffer.from(tokenHash(t), 'hex'));
  }

  forget(): void {
    this.cache.clear();
    this.good.clear();
  }

  /** Tokens that resolved in the last 10 minutes: a flood of made-up tokens from their address does not lock them out. */
  private readonly good = new Map<string, number>();
  knownGood(token: string): boolean {
    const at = this.good.get(tokenHash(token));
    return at !== undefined && Date.now() - at < 600_000;
  }

  async resolve(token: string): Promise<Principal | null> {
    const hash = tokenHash(token);
    const hit = this.cache.get(hash);
    if (hit && Date.now() - hit.at < (this.cfg.cacheMs ?? 5000)) return hit.p;
    const p = await this.lookup(token, hash);
    if (this.cache.size > 10_000) this.cache.clear();
    if (p) {
      if (this.good.size > 10_000) this.good.clear();
      this.good.set(hash, Date.now());
    }
    this.cache.set(hash, { p, at: Date.now() });
    return p;
  }

  private async lookup(token: string, hash: string): Promise<Principal | null> {
    const h = Buffer.from(hash, 'hex');
    if (this.admins.some((a) => timingSafeEqual(a, h))) return { kind: 'admin', tokenId: null, name: 'GPUPLANE_ADMIN_TOKEN' };
    const run = parseRunToken(token);
    if (run) {
      // The run's current node (its job's attempt) and that node's live run keys.
      const [r] = await this.db
        .select({ nodeId: jobAttempts.nodeId })
        .from(runs)
        .innerJoin(jobAttempts, and(eq(jobAttempts.jobId, runs.jobId), eq(jobAttempts.attempt, runs.attempt)))
        .where(eq(runs.id, run.runId));
      if (!r?.nodeId) return null;
      const keys = await this.db
        .select({ runKey: apiTokens.runKey })
        .from(apiTokens)
        .where(and(eq(apiTokens.nodeId, r.nodeId), isNull(apiTokens.revokedAt)));
      return keys.some((k) => k.runKey && runMacValid(k.runKey, run.runId, run.mac)) ? { kind: 'run', runId: run.runId, nodeId: r.nodeId } : null;
    }
    const [t] = await this.db.select().from(apiTokens).where(and(eq(apiTokens.tokenHash, hash), isNull(apiTokens.revokedAt)));
    if (!t) return null;
    if (t.role === 'admin') return { kind: 'admin', tokenId: t.id, name: t.name };
    if (t.role === 'node') return { kind: 'node', tokenId: t.id, name: t.name, nodeId: t.nodeId! };
    return { kind: 'user', tokenId: t.id, name: t.name, role: t.role, projects: t.projects };
  }
}

function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  if (!m) throw unauthorized('the Authorization header must be "Bearer <token>"');
  return m[1];
}

/**
 * Unknown tokens per client address: the rate limit counts per token, so a client that sends a
 * new made-up token each time would escape it (and cost a lookup each). Past MAX_FAILURES a
 * minute an address gets 429 before any lookup.
 */
class FailedTokens {
  static readonly MAX_FAILURES = 100;
  private readonly seen = new Map<string, { n: number; since: number }>();
  check(ip: string): void {
    const f = this.seen.get(ip);
    if (!f || Date.now() - f.since > 60_000) return;
    if (f.n >= FailedTokens.MAX_FAILURES) throw new DomainError('rate_limited', `${FailedTokens.MAX_FAILURES} unknown tokens a minute from ${ip}: wait a minute`);
  }
  add(ip: string): void {
    const f = this.seen.get(ip);
    if (!f || Date.now() - f.since > 60_000) {
      if (this.seen.size > 10_000) this.seen.clear();
      this.seen.set(ip, { n: 1, since: Date.now() });
    } else f.n++;
  }
}

/** Installs the checks on the /api/v1 scope. Call before the routes are registered. */
export function installAuth(app: FastifyInstance, db: Db, resolver: TokenResolver): void {
  const failures = new FailedTokens();
  app.decorateRequest('principal', null);
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    for (const m of methods) {
      if (m === 'HEAD' || m === 'OPTIONS') continue;
      if (!RULES[ruleKey(m, r.url)]) throw new Error(`route ${m} ${r.url} has no access rule in api/auth.ts`);
    }
  });
  // Who it is, and all that does not need the body, before the body is read (a refused
  // caller learns nothing of the body's schema); a project named in the body after validation.
  app.addHook('onRequest', async (req) => {
    const rule = ruleOf(req);
    if (!rule || rule.access === 'open') return;
    const token = bearer(req);
    if (!token) throw unauthorized('this needs a token: gpuctl login, GPUPLANE_TOKEN, or "Authorization: Bearer <token>"');
    if (!resolver.knownGood(token)) failures.check(req.ip);
    const p = await resolver.resolve(token);
    if (!p) {
      failures.add(req.ip);
      throw unauthorized('unknown or revoked token');
    }
    req.principal = p;
    if (rule.access === 'node' && p.kind !== 'node') throw forbidden(`${describe(p)} is not a node token: only the node an attempt was dispatched to launches it (and gets its secret values) and reports it started`);
    if (p.kind === 'admin' || rule.everyone) return;
    const params = req.params as Params;
    const query = req.query as Query;
    if (p.kind === 'run') {
      if (rule.runOf && rule.runOf({ params }) === p.runId) return;
      throw forbidden(`${describe(p)} may only write its own run`);
    }
    if (p.kind === 'node') {
      if (rule.nodeAttempt) {
        const { jobId, attempt } = rule.nodeAttempt({ params, query });
        const where = attempt !== null && Number.isInteger(attempt) ? and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)) : eq(jobAttempts.jobId, jobId);
        const rows = await db.select({ nodeId: jobAttempts.nodeId }).from(jobAttempts).where(where);
        if (rows.length === 0 && rule.access !== 'node') return; // the handler answers 404
        if (rows.length > 0 && rows.some((r) => r.nodeId === p.nodeId)) return;
        throw forbidden(`${describe(p)} may not touch job ${jobId}: it was not dispatched to ${p.nodeId}`);
      }
      throw forbidden(`${describe(p)} may only ship logs of the jobs dispatched to it`);
    }
    if (rule.access === 'any') return;
    if (rule.access === 'admin') throw forbidden(`${describe(p)} is not an admin token`);
    if (rule.access === 'write' && p.role !== 'member') throw forbidden(`${describe(p)} may only read`);
    if (!rule.fromBody) await checkProject(req, rule, p);
  });
  app.addHook('preHandler', async (req) => {
    const rule = ruleOf(req);
    const p = req.principal;
    if (rule?.fromBody && p?.kind === 'user') await checkProject(req, rule, p);
  });

  async function checkProject(req: FastifyRequest, rule: Rule, p: Principal): Promise<void> {
    const write = rule.access === 'write';
    const target = await rule.project!(db, { params: req.params as Params, query: req.query as Query, body: req.body as Body });
    if (target === undefined) return; // a missing resource: the handler answers 404
    for (const name of Array.isArray(target) ? target : [target]) {
      const project = name === '' ? null : name;
      if (!allows(p, project, write)) {
        const what = project === null ? 'resources of no project' : `project "${project}"`;
        throw forbidden(`${describe(p)} may not ${write ? 'write' : 'read'} ${what}`);
      }
    }
  }
}

function ruleOf(req: FastifyRequest): Rule | undefined {
  const url = req.routeOptions.url;
  if (!url) return undefined; // no route: the not-found handler answers
  const rule = RULES[ruleKey(req.method === 'HEAD' ? 'GET' : req.method, url)];
  if (!rule) throw forbidden(`no access rule for ${req.method} ${url}`);
  return rule;
}
