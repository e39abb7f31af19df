/**
 * What every MLflow route shares: MLflow's error shape (the client raises its own exceptions from
 * it), who the caller is (the same tokens, roles and project scoping as /api/v1), and reading a
 * request's fields (a GET's from the query, a POST's from the JSON body).
 */
import type { FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { projectIdsNamed } from '../../db/queries/auth.ts';
import { FailedTokens } from '../auth/failed-tokens.ts';
import { describe, type Principal } from '../auth/principal.ts';
import type { TokenResolver } from '../auth/token-resolver.ts';
import { allows, principalOf } from '../auth/auth.ts';
import { offsetOf } from './wire.ts';
import { missingMessage, wrongTypeMessage } from '../../domain/mlflow-rules.ts';

export type MlflowCode =
  | 'INVALID_PARAMETER_VALUE'
  | 'RESOURCE_DOES_NOT_EXIST'
  | 'RESOURCE_ALREADY_EXISTS'
  | 'PERMISSION_DENIED'
  | 'UNAUTHENTICATED'
  | 'NOT_IMPLEMENTED'
  | 'INVALID_STATE'
  | 'REQUEST_LIMIT_EXCEEDED'
  | 'INTERNAL_ERROR';

const STATUS: Record<MlflowCode, number> = {
  INVALID_PARAMETER_VALUE: 400,
  RESOURCE_DOES_NOT_EXIST: 404,
  RESOURCE_ALREADY_EXISTS: 400,
  PERMISSION_DENIED: 403,
  UNAUTHENTICATED: 401,
  NOT_IMPLEMENTED: 501,
  INVALID_STATE: 400,
  REQUEST_LIMIT_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
};

/** An error as MLflow's server sends it: `{"error_code": …, "message": …}` with its HTTP status. */
export class MlflowError extends Error {
  constructor(
    readonly code: MlflowCode,
    message: string,
  ) {
    super(message);
  }
  get status(): number {
    return STATUS[this.code];
  }
}

export const invalid = (message: string) => new MlflowError('INVALID_PARAMETER_VALUE', message);

/** A request's fields: the JSON body of a POST, the query of a GET. */
export function fieldsOf(req: FastifyRequest): Record<string, unknown> {
  const src = req.method === 'GET' ? req.query : req.body;
  if (src === undefined || src === null) return {};
  if (typeof src !== 'object' || Array.isArray(src)) throw invalid('the request body must be a JSON object');
  return src as Record<string, unknown>;
}

/** A string field; `required` makes its absence MLflow's "Missing value for required parameter". */
export function text(f: Record<string, unknown>, name: string, required: true): string;
export function text(f: Record<string, unknown>, name: string, required?: false): string | undefined;
export function text(f: Record<string, unknown>, name: string, required = false): string | undefined {
  const v = f[name];
  if (v === undefined || v === null || v === '') {
    if (required) throw invalid(`Missing value for required parameter '${name}'. See the API docs for more information about request parameters.`);
    return undefined;
  }
  if (typeof v !== 'string') throw invalid(wrongTypeMessage(name, v));
  return v;
}

/** A run's id: `run_id`, or `run_uuid`, its old name; when neither is there, MLflow's message names `run_id`. */
export function runIdOf(f: Record<string, unknown>): string {
  const id = text(f, 'run_id') ?? text(f, 'run_uuid');
  if (id === undefined) throw invalid(missingMessage('run_id'));
  return id;
}

/** A repeated field of a JSON body: a list, or MLflow's wrong-type message (`"metrics": "foo"`). */
export function array(f: Record<string, unknown>, name: string): unknown[] {
  const v = f[name];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid(wrongTypeMessage(name, v));
  return v;
}

/** An int64 field: the JSON of protobuf sends it as a number or a decimal string. */
export function int(f: Record<string, unknown>, name: string): number | undefined {
  const v = f[name];
  if (v === undefined || v === null || v === '') return undefined;
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw invalid(`Invalid value ${JSON.stringify(v)} for parameter '${name}' supplied: it must be an integer`);
  return n;
}

/** A search's page: `max_results` (1,000 unless given, at most 50,000) and where `page_token` starts. */
export function pageOf(f: Record<string, unknown>): { max: number; offset: number } {
  const max = int(f, 'max_results') ?? 1000;
  if (max < 1 || max > 50_000) throw invalid(`Invalid value ${max} for parameter 'max_results' supplied. It must be at most 50000.`);
  const offset = offsetOf(f.page_token);
  if (offset === null) throw invalid('Invalid page token');
  return { max, offset };
}

/** A repeated field (a list in a body; one or more `name=` in a query). */
export function list(f: Record<string, unknown>, name: string): unknown[] {
  const v = f[name];
  if (v === undefined || v === null) return [];
  return Array.isArray(v) ? v : [v];
}

export interface Caller {
  /** undefined: the app was built without auth (tests of the routes themselves): all is allowed. */
  principal: Principal | undefined;
}

/** Resolves the bearer token the MLflow client sends (MLFLOW_TRACKING_TOKEN) to a principal. */
export class MlflowAuth {
  private readonly failures = new FailedTokens();
  constructor(
    private readonly db: Db,
    private readonly resolver: TokenResolver | null,
  ) {}

  async caller(req: FastifyRequest): Promise<Caller> {
    if (!this.resolver) return { principal: undefined };
    // Its refusals are DomainErrors, which ./index.ts answers as UNAUTHENTICATED and REQUEST_LIMIT_EXCEEDED.
    const p = await principalOf(req, this.resolver, this.failures, 'this needs a GPUPlane token: set MLFLOW_TRACKING_TOKEN (gpuctl token create, or the token gpuctl up printed)');
    if (p.kind === 'metrics') throw new MlflowError('PERMISSION_DENIED', `${describe(p)} may only scrape GET /metrics`);
    if (p.kind === 'node') throw new MlflowError('PERMISSION_DENIED', `${describe(p)} may not use the MLflow API`);
    return { principal: p };
  }

  /** The project ids a caller's lists show: null for all. */
  async visible(c: Caller): Promise<string[] | null> {
    const p = c.principal;
    if (!p || p.kind === 'admin' || (p.kind === 'user' && p.projects.includes('*'))) return null;
    if (p.kind !== 'user' || p.projects.length === 0) return [];
    return projectIdsNamed(this.db, p.projects);
  }
}

/**
 * Whether the caller may read (or write) a project; a run token reaches only its own run (and
 * reads its run's experiment), which the routes check by run id.
 */
export function mayTouch(c: Caller, project: string, write: boolean): boolean {
  return !c.principal || allows(c.principal, project, write);
}

/** Refuses a caller that may not touch the project: an unreadable one reads as not found (`missing`), a read-only one as 403. */
export function mustTouch(c: Caller, project: string, write: boolean, missing: () => MlflowError): void {
  if (mayTouch(c, project, write)) return;
  if (!mayTouch(c, project, false)) throw missing();
  throw new MlflowError('PERMISSION_DENIED', `${describe(c.principal!)} may only read project "${project}"`);
}
