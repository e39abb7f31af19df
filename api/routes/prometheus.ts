/** GET /metrics for Prometheus (docs/prometheus.md), and the timing of every request it reports. */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { scrapeCheck } from '../auth/auth.ts';
import type { PlaneMetrics } from '../plane-metrics.ts';
import type { TokenResolver } from '../auth/token-resolver.ts';

/**
 * Times every request of the app into gpuplane_http_request_duration_seconds, labelled by its
 * route pattern (never the raw URL: ids would make the label set unbounded); a request no route
 * matched is "unmatched". Install on the root before any route is registered.
 */
export function installRequestTiming(app: FastifyInstance, metrics: PlaneMetrics): void {
  app.addHook('onResponse', async (req, reply) => {
    metrics.httpSeconds.observe({ route: req.routeOptions.url ?? 'unmatched', method: req.method, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });
}

/** GET /metrics: a metrics or admin token when the app has auth (resolver), open without. */
export async function prometheusRoutes(app: FastifyInstance, { metrics, resolver }: { metrics: PlaneMetrics; resolver: TokenResolver | null }): Promise<void> {
  app.get(
    '/metrics',
    {
      // Text, not JSON: documented in docs/prometheus.md, not in the OpenAPI document of /api/v1.
      schema: { hide: true, response: { 200: Type.String() } },
      ...(resolver ? { onRequest: scrapeCheck(resolver) } : {}),
    },
    async (_req, reply) => {
      const text = await metrics.text();
      return reply.type(metrics.registry.contentType).send(text);
    },
  );
}
