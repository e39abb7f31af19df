import swagger from '@fastify/swagger';
import { lazyCompilers } from './lazy-compilers.ts';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { pingDatabase } from '../db/queries/health.ts';
import { installAuth } from './auth/auth.ts';
import type { ApiDeps } from './deps.ts';
import { declareMachineryResponses, markOptionalBodies, MAX_PARAM_LENGTH } from './declared-responses.ts';
import { installErrorHandler } from './errors.ts';
import { registerGuards } from './auth/guards.ts';
import { PointLimiter } from './point-limits.ts';
import { DEFAULT_PROJECT_POINTS, DEFAULT_RUN_POINTS } from '../domain/point-bucket.ts';
import { projectOfRun } from '../db/queries/auth.ts';
import { installSecurityHeaders } from './auth/security-headers.ts';
import { installInputGuard } from './input-guard.ts';
import { installImageCheck } from './container-image.ts';
import { installMethodCheck } from './methods.ts';
import { CHECK_RESPONSES_ENV, installResponseCheck } from './response-check.ts';
import { jobRoutes } from './routes/jobs.ts';
import { jobCountRoutes } from './routes/job-counts.ts';
import { consoleAssets, consoleRoutes } from './routes/console.ts';
import { checkpointRoutes } from './routes/checkpoints.ts';
import { evaluationRoutes } from './routes/evaluations.ts';
import { codeRoutes } from './routes/code.ts';
import { forkRoutes } from './routes/fork.ts';
import { checkpointRegisterRoutes } from './routes/checkpoint-register.ts';
import { logRoutes } from './routes/logs.ts';
import { nodeEnvRoutes } from './routes/node-envs.ts';
import { peerRoutes } from './routes/peers.ts';
import { nodeRoutes } from './routes/nodes.ts';
import { telemetryRoutes } from './routes/telemetry.ts';
import { stallAfterRoutes } from './routes/stall-after.ts';
import { projectRoutes } from './routes/projects.ts';
import { runRoutes } from './routes/runs.ts';
import { runMetricRoutes } from './routes/run-metrics.ts';
import { runEventRoutes } from './routes/run-events.ts';
import { launchRoutes } from './routes/launch.ts';
import { checkpointStoredRoutes } from './routes/checkpoint-stored.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { quotaRoutes } from './routes/quotas.ts';
import { projectUserRoutes } from './routes/project-users.ts';
import { sweepRoutes } from './routes/sweeps.ts';
import { SweepWaker } from './sweep-waker.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { installRequestTiming, prometheusRoutes } from './routes/prometheus.ts';
import { PlaneMetrics } from './plane-metrics.ts';
import { mlflowRoutes } from './mlflow/index.ts';
import { formatSchemaErrors } from './schema-errors.ts';
import { ErrorBody, HealthSchema } from './schemas/common.ts';
import { TokenResolver } from './auth/token-resolver.ts';

const API_DESCRIPTION =
  'Jobs on GPU nodes, runs, checkpoints and evaluations. A path asked with a method it does not declare answers 405 with an `Allow` header naming those it does; a path no route has answers 404. Both are Error bodies.';

/** Builds the Fastify app: every route under /api/v1 with its schemas, plus OpenAPI, MLflow, GET /metrics and the console page. */
export async function buildApp(given: ApiDeps, opts: FastifyServerOptions = {}): Promise<FastifyInstance> {
  const metrics = given.metrics ?? new PlaneMetrics(given.db);
  const deps: ApiDeps = { ...given, metrics };
  const app = Fastify({
    ...opts,
    // Types are not coerced: "2" is not a number of GPUs; unknown fields are errors, not dropped.
    // verbose: an anyOf's error carries its schema, to say in words what the field takes (./schema-errors.ts).
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false, verbose: true } },
    // Each route's validator and serializer compiled on first use (./lazy-compilers.ts): a faster start.
    schemaController: lazyCompilers(),
    schemaErrorFormatter: (errors, dataVar) => new Error(formatSchemaErrors(errors, dataVar)),
    // Longer than any declared maxLength once percent-encoded: a too-long id is the schema's 400, not the router's 414.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A URL the router cannot decode is named in words, not echoed back whole.
    frameworkErrors: (err, _req, reply) => {
      const bad = err.code === 'FST_ERR_BAD_URL' ? 'the URL is not valid percent-encoded UTF-8' : err.message;
      void (reply as FastifyReply).status(err.statusCode ?? 400).send({ error: 'invalid', message: bad });
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  installErrorHandler(app);
  // One for the API's and MLflow's metric writes: it remembers which runs are an asha sweep's trials.
  deps.sweepWaker ??= new SweepWaker(deps.db, deps.client, app.log);
  // One for the API's and MLflow's metric writes: the buckets of a run and of its project are the same whichever protocol writes.
  deps.pointLimiter ??= new PointLimiter(deps.pointLimits ?? { run: DEFAULT_RUN_POINTS, project: DEFAULT_PROJECT_POINTS }, (id) => projectOfRun(deps.db, id));
  installRequestTiming(app, metrics);
  installSecurityHeaders(app);
  await registerGuards(app, deps.guards ?? {});
  installMethodCheck(app);
  installInputGuard(app);
  installImageCheck(app);
  declareMachineryResponses(app, '/api/v1', deps.auth !== null);
  if (process.env[CHECK_RESPONSES_ENV] === '1') installResponseCheck(app, '/api/v1');
  app.addSchema(ErrorBody);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'GPUPlane API', version: '0.1.0', description: API_DESCRIPTION },
      ...(deps.auth ? { components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } }, security: [{ bearer: [] }] } : {}),
    },
    // A body whose schema takes null (a log chunk) may be left out: the document says it is not required.
    transformObject: (d) => markOptionalBodies('openapiObject' in d ? d.openapiObject : d.swaggerObject),
  });
  // One resolver for /api/v1 and /mlflow: a token revoked through the API is forgotten by both.
  const resolver = deps.auth ? new TokenResolver(deps.db, deps.auth) : null;
  await app.register(
    async (api) => {
      if (deps.auth && resolver) {
        installAuth(api, deps.db, resolver);
        await api.register(tokenRoutes, { ...deps, resolver });
      }
      await api.register(jobRoutes, deps);
      await api.register(jobCountRoutes, deps);
      await api.register(nodeRoutes, deps);
      await api.register(nodeEnvRoutes, deps);
      await api.register(peerRoutes, deps);
      await api.register(telemetryRoutes, deps);
      await api.register(stallAfterRoutes, deps);
      await api.register(runRoutes, deps);
      await api.register(runMetricRoutes, deps);
      await api.register(runEventRoutes, deps);
      await api.register(projectRoutes, deps);
      await api.register(quotaRoutes, deps);
      await api.register(projectUserRoutes, deps);
      await api.register(checkpointRoutes, deps);
      await api.register(evaluationRoutes, deps);
      await api.register(forkRoutes, deps);
      await api.register(checkpointRegisterRoutes, deps);
      await api.register(logRoutes, deps);
      await api.register(launchRoutes, deps);
      await api.register(checkpointStoredRoutes, deps);
      await api.register(codeRoutes, deps);
      await api.register(webhookRoutes, deps);
      await api.register(sweepRoutes, deps);
      await api.register(consoleRoutes, deps);
      api.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
      api.get('/health', { schema: { tags: ['health'], summary: 'Liveness of the API and its database', response: { 200: HealthSchema } } }, async () => {
        await pingDatabase(deps.db);
        return { ok: true, temporal_ui: deps.temporalUiUrl ?? null };
      });
    },
    { prefix: '/api/v1' },
  );
  await app.register(mlflowRoutes, { prefix: '/mlflow', db: deps.db, resolver, artifactsDir: deps.artifactsDir ?? null, store: deps.store, metrics, sweepWaker: deps.sweepWaker, pointLimiter: deps.pointLimiter });
  await app.register(prometheusRoutes, { metrics, resolver });
  await app.register(consoleAssets);
  return app;
}
