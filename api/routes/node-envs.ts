/**
 * A node's Python environments (issue 45, docs/environments.md): its agent reports the whole list
 * at start and after each change (a build, an eviction, an attempt taking one or giving it back),
 * with its node token; admins read the last report (`gpuctl node envs NODE`).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { nodeEnvs, saveNodeEnvs } from '../../db/queries/nodes.ts';
import type { NodeEnvEntry } from '../../domain/env-cache.ts';
import type { ApiDeps } from '../deps.ts';
import { notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { NodeEnvsAnswer, NodeEnvsBody, type NodeEnvJson } from '../schemas/node-envs.ts';

const fromJson = (e: NodeEnvJson): NodeEnvEntry => ({ key: e.key, kind: e.kind, sha256: e.sha256, bytes: e.bytes, builtAt: e.built_at, lastUsedAt: e.last_used_at, inUse: e.in_use });
const toJson = (e: NodeEnvEntry): NodeEnvJson => ({ key: e.key, kind: e.kind, sha256: e.sha256, bytes: e.bytes, built_at: e.builtAt, last_used_at: e.lastUsedAt, in_use: e.inUse });

export const nodeEnvRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  app.put(
    '/nodes/:id/envs',
    { schema: { tags: ['nodes'], summary: "A node's Python environments, as its agent reports them (its node token): the whole list, replacing the last report", params: IdParams, body: NodeEnvsBody, response: { 200: NodeEnvsAnswer, ...NotFound } } },
    async (req) => {
      const report = { boundBytes: req.body.bound_bytes, envs: req.body.envs.map(fromJson) };
      const at = new Date();
      if (!(await saveNodeEnvs(db, req.params.id, report, at))) throw notFound('node', req.params.id);
      return answer(req.params.id, report.boundBytes, report.envs, at);
    },
  );
  app.get(
    '/nodes/:id/envs',
    { schema: { tags: ['nodes'], summary: "The Python environments a node holds in its cache (admins), as its agent last reported them, least recently used first", params: IdParams, response: { 200: NodeEnvsAnswer, ...NotFound } } },
    async (req) => {
      const got = await nodeEnvs(db, req.params.id);
      if (!got) throw notFound('node', req.params.id);
      return answer(req.params.id, got.report?.boundBytes ?? null, got.report?.envs ?? [], got.at);
    },
  );
};

function answer(nodeId: string, boundBytes: number | null, envs: NodeEnvEntry[], at: Date | null) {
  const sorted = [...envs].sort((a, b) => a.lastUsedAt.localeCompare(b.lastUsedAt) || a.key.localeCompare(b.key));
  return { node_id: nodeId, reported_at: at?.toISOString() ?? null, bound_bytes: boundBytes, total_bytes: envs.reduce((n, e) => n + e.bytes, 0), envs: sorted.map(toJson) };
}
