/**
 * Who may call what. Every route under /api/v1 has a rule in RULES (api/auth/access-rules.ts; a
 * route without one makes the app refuse to start), checked in hooks installed here before
 * the handler runs, so a refused request never reaches its handler and changes nothing.
 *
 * Principals are in api/auth/principal.ts; api/auth/token-resolver.ts turns a bearer token into one (with
 * its cache), and api/auth/failed-tokens.ts limits the unknown tokens an address may try.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { attemptNodeIds, projectIdsNamed } from '../../db/queries/auth.ts';
import { hasRule, ruleOf, type Body, type Params, type Query, type Rule } from './access-rules.ts';
import { forbidden, notFound, unauthorized } from '../errors.ts';
import { FailedTokens } from './failed-tokens.ts';
import { describe, type Principal } from './principal.ts';
import type { TokenResolver } from './token-resolver.ts';

/** Whether a principal may touch a project (null: a resource of no project) with this access. */
export function allows(p: Principal, project: string | null, write: boolean): boolean {
  if (p.kind === 'admin') return true;
  if (p.kind !== 'user') return false;
  if (write && p.role !== 'member') return false;
  return p.projects.includes('*') || (project !== null && p.projects.includes(project));
}

/** Whether a request may read a project (null: of no project); an app built without auth (no principal) may read all. */
export function mayRead(req: FastifyRequest, project: string | null): boolean {
  // Without auth the request is never decorated: principal is undefined, not null.
  return !req.principal || allows(req.principal, project, false);
}

/**
 * The projects a principal sees in lists: null for all of them, else project ids (a token's
 * projects that exist). Lists of jobs and runs and their counts filter by it.
 */
export async function visibleProjectIds(db: Db, req: FastifyRequest): Promise<string[] | null> {
  const p = req.principal;
  if (!p || p.kind === 'admin' || (p.kind === 'user' && p.projects.includes('*'))) return null;
  if (p.kind !== 'user' || p.projects.length === 0) return [];
  return projectIdsNamed(db, p.projects);
}

/**
 * The principal of a request's bearer token (/api/v1, GET /metrics, /mlflow): 401 without one
 * (`missing` says how to get one) or for an unknown or revoked one; an address that keeps trying
 * unknown tokens is held off (429) by `failures`.
 */
export async function principalOf(req: FastifyRequest, resolver: TokenResolver, failures: FailedTokens, missing: string): Promise<Principal> {
  const token = bearer(req);
  if (!token) throw unauthorized(missing);
  if (!resolver.knownGood(token)) failures.check(req.ip);
  const p = await resolver.resolve(token);
  if (!p) {
    failures.add(req.ip);
    throw unauthorized('unknown or revoked token');
  }
  return p;
}

function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  if (!m) throw unauthorized('the Authorization header must be "Bearer <token>"');
  return m[1];
}

/** Installs the checks on the /api/v1 scope. Call before the routes are registered. */
export function installAuth(app: FastifyInstance, db: Db, resolver: TokenResolver): void {
  const failures = new FailedTokens();
  app.decorateRequest('principal', null);
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    for (const m of methods) {
      if (m === 'HEAD' || m === 'OPTIONS') continue;
      if (!hasRule(m, r.url)) throw new Error(`route ${m} ${r.url} has no access rule in api/auth/access-rules.ts`);
    }
  });
  // Who it is, and all that does not need the body, before the body is read (a refused
  // caller learns nothing of the body's schema); a project named in the body after validation.
  app.addHook('onRequest', async (req) => {
    const rule = ruleOf(req);
    if (!rule || rule.access === 'open') return;
    const p = await principalOf(req, resolver, failures, 'this needs a token: gpuctl login, GPUPLANE_TOKEN, or "Authorization: Bearer <token>"');
    req.principal = p;
    if (p.kind === 'metrics') throw forbidden(`${describe(p)} may only scrape GET /metrics`);
    if (rule.access === 'node' && p.kind !== 'node') throw forbidden(`${describe(p)} is not a node token: only the node an attempt was dispatched to launches it (and gets its secret values) and reports it started`);
    if (p.kind === 'admin' || rule.everyone) return;
    const params = req.params as Params;
    const query = req.query as Query;
    if (p.kind === 'run') {
      if (rule.runOf && rule.runOf({ params }) === p.runId) return;
      throw forbidden(`${describe(p)} may only write its own run`);
    }
    if (p.kind === 'node') {
      if (rule.nodeSelf) {
        if (rule.nodeSelf({ params }) === p.nodeId) return;
        throw forbidden(`${describe(p)} may only report for node ${p.nodeId}`);
      }
      if (rule.nodeAttempt) {
        const { jobId, attempt } = rule.nodeAttempt({ params, query });
        const nodes = await attemptNodeIds(db, jobId, attempt !== null && Number.isInteger(attempt) ? attempt : null);
        if (nodes.length === 0 && rule.access !== 'node') return; // the handler answers 404
        if (nodes.length > 0 && nodes.some((n) => n === p.nodeId)) return;
        throw forbidden(`${describe(p)} may not touch job ${jobId}: it was not dispatched to ${p.nodeId}`);
      }
      throw forbidden(`${describe(p)} may only ship logs of the jobs dispatched to it`);
    }
    if (rule.access === 'any') return;
    if (rule.access === 'admin') throw forbidden(`${describe(p)} is not an admin token`);
    // A viewer's write is 403 whatever it names, so the answer says nothing of the id.
    if (rule.access === 'write' && p.role !== 'member') throw forbidden(`${describe(p)} may only read`);
    if (!rule.fromBody) await checkProject(req, rule, p);
  });
  app.addHook('preHandler', async (req) => {
    const rule = ruleOf(req);
    const p = req.principal;
    if (rule?.fromBody && p?.kind === 'user') await checkProject(req, rule, p);
  });

  /**
   * A resource the caller may not read answers as an unknown one (404, the handler's words), so
   * an id of another project is not confirmed to exist (a viewer's write was refused with 403
   * before, whatever it names). A project named by name is 403 whether or not it exists.
   */
  async function checkProject(req: FastifyRequest, rule: Rule, p: Principal): Promise<void> {
    const write = rule.access === 'write';
    const target = await rule.project!(db, { params: req.params as Params, query: req.query as Query, body: req.body as Body });
    if (target === undefined) return;
    if (Array.isArray(target)) {
      for (const t of target) if (t.project === undefined || !allows(p, t.project, false)) throw notFound(t.what, t.id);
      return;
    }
    if (!allows(p, target, write)) {
      const what = target === null ? 'resources of no project' : `project "${target}"`;
      throw forbidden(`${describe(p)} may not ${write ? 'write' : 'read'} ${what}`);
    }
  }
}

/**
 * The check of GET /metrics, which is outside /api/v1 and its rules: a metrics token (whose only
 * right this is) or an admin token; any other is refused with 403, no token with 401.
 */
export function scrapeCheck(resolver: TokenResolver): (req: FastifyRequest) => Promise<void> {
  const failures = new FailedTokens();
  return async (req) => {
    const p = await principalOf(req, resolver, failures, 'GET /metrics needs a metrics or admin token: "Authorization: Bearer <token>" (gpuctl token create --role metrics)');
    if (p.kind !== 'metrics' && p.kind !== 'admin') throw forbidden(`${describe(p)} may not scrape GET /metrics: it takes a metrics or an admin token`);
  };
}
