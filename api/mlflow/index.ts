/**
 * MLflow's tracking protocol, served under /mlflow: `MLFLOW_TRACKING_URI=http://HOST:8787/mlflow`
 * and `MLFLOW_TRACKING_TOKEN=<a GPUPlane token>` make unchanged MLflow code log into GPUPlane
 * (docs/mlflow.md lists each endpoint). Errors have MLflow's shape, so the client raises its
 * usual exceptions; an endpoint we do not serve answers NOT_IMPLEMENTED naming it, never a 404
 * the client would misread.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import type { ObjectStore } from '../../runtime/object-store-types.ts';
import type { Db } from '../../db/client.ts';
import { DomainError } from '../errors.ts';
import { loggableUrl } from '../request-log.ts';
import type { SweepWaker } from '../sweep-waker.ts';
import type { PlaneMetrics } from '../plane-metrics.ts';
import type { PointLimiter } from '../point-limits.ts';
import type { TokenResolver } from '../auth/token-resolver.ts';
import { MlflowAuth, MlflowError } from './context.ts';
import { artifactRoutes } from './artifacts.ts';
import { artifactFiles } from './artifact-files.ts';
import { experimentRoutes } from './experiments.ts';
import { runRoutes } from './runs.ts';
import { modelRoutes } from './models.ts';
import { runIoRoutes } from './run-io.ts';
import { metricHistoryRoutes } from './metric-history.ts';
import { reachTrace, traceExperimentId, traceRoutes } from './traces.ts';
import { Registry, registeredModelRoutes } from './registry.ts';
import { modelVersionRoutes } from './registry-versions.ts';

/** DomainError codes (the input guard's, a guard's) as MLflow's. */
const CODE_OF: Record<string, MlflowError['code']> = { invalid: 'INVALID_PARAMETER_VALUE', not_found: 'RESOURCE_DOES_NOT_EXIST', unauthorized: 'UNAUTHENTICATED', forbidden: 'PERMISSION_DENIED', rate_limited: 'REQUEST_LIMIT_EXCEEDED', too_large: 'INVALID_PARAMETER_VALUE' };

export interface MlflowDeps {
  db: Db;
  /** null: no auth (tests of the routes themselves). */
  resolver: TokenResolver | null;
  /** Where MLflow's artifacts are kept with a `local` store (GPUPLANE_ARTIFACTS_DIR); null: not served there. */
  artifactsDir: string | null;
  /** The plane's store: a `shared:` or `s3://` one keeps the artifacts instead, for every replica (./artifact-files.ts). */
  store?: ObjectStore | null;
  /** Counts the metric points logged (gpuplane_metric_points_ingested_total). */
  metrics?: PlaneMetrics;
  /** Wakes an asha sweep whose trial logged past a rung (api/sweep-waker.ts). */
  sweepWaker?: SweepWaker;
  /** The per-run and per-project limits on metric points, shared with /api/v1 (api/point-limits.ts); none when absent. */
  pointLimiter?: PointLimiter;
}

export async function mlflowRoutes(app: FastifyInstance, deps: MlflowDeps): Promise<void> {
  const auth = new MlflowAuth(deps.db, deps.resolver);
  // MLflow's protocol is documented by MLflow (docs/mlflow.md lists what is served): not in our OpenAPI document.
  app.addHook('onRoute', (r) => {
    r.schema = { ...r.schema, hide: true };
  });
  app.setErrorHandler((err: FastifyError | MlflowError | DomainError, req, reply) => {
    if (err instanceof MlflowError) return reply.status(err.status).send({ error_code: err.code, message: err.message });
    if (err instanceof DomainError) return reply.status(err.status).send({ error_code: CODE_OF[err.code] ?? 'INVALID_PARAMETER_VALUE', message: err.message });
    const status = (err as FastifyError).statusCode ?? 500;
    if (status < 500) return reply.status(status).send({ error_code: status === 413 ? 'INVALID_PARAMETER_VALUE' : 'BAD_REQUEST', message: err.message });
    req.log.error({ err, method: req.method, url: loggableUrl(req.url) }, 'request failed');
    return reply.status(500).send({ error_code: 'INTERNAL_ERROR', message: 'internal error; see the API log' });
  });
  // MLflow's UI is not served: the links the client prints (`/mlflow/#/experiments/<id>/runs/<run>`)
  // go to the console, whose hash routes take them (a redirect without a fragment keeps the link's).
  app.get('/', async (_req, reply) => reply.redirect('/', 302));
  // Every other path under /mlflow (a route, so that the console's catch-all does not take it).
  app.all('/*', async (req, reply) => {
    const path = loggableUrl(req.url).split('?')[0].replace(/^\/mlflow/, '');
    return reply.status(501).send({ error_code: 'NOT_IMPLEMENTED', message: `GPUPlane does not serve the MLflow endpoint ${req.method} ${path} (docs/mlflow.md lists what it serves)` });
  });
  experimentRoutes(app, deps.db, auth);
  runRoutes(app, deps.db, auth, deps.metrics, deps.sweepWaker, deps.pointLimiter);
  modelRoutes(app, deps.db, auth);
  runIoRoutes(app, deps.db, auth);
  metricHistoryRoutes(app, deps.db, auth);
  traceRoutes(app, deps.db, auth);
  const registry = new Registry(deps.db, auth);
  registeredModelRoutes(app, registry);
  modelVersionRoutes(app, registry);
  // A scope of their own: uploads are bytes, not JSON.
  await app.register(async (scope) => artifactRoutes(scope, deps.db, auth, { files: artifactFiles({ store: deps.store, dir: deps.artifactsDir }), reachTrace: async (c, id, write) => traceExperimentId(await reachTrace(deps.db, c, id, write)) }));
}
