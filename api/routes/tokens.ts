/** API tokens (admins only) and GET /whoami (any token). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { setNodeOffline } from '../../db/queries/nodes.ts';
import { listTokens, nodeHasToken, revokeToken, type TokenRow } from '../../db/queries/tokens.ts';
import type { ApiDeps } from '../deps.ts';
import type { TokenResolver } from '../auth/token-resolver.ts';
import { createToken } from '../auth/token-store.ts';
import { DomainError, notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { CreatedTokenSchema, CreateTokenBody, TokenSchema, WhoAmISchema } from '../schemas/tokens.ts';

const tokenJson = (t: TokenRow) => ({
  id: t.id,
  name: t.name,
  role: t.role,
  projects: t.projects,
  node_id: t.nodeId,
  created_at: t.createdAt.toISOString(),
  revoked_at: t.revokedAt?.toISOString() ?? null,
});

export const tokenRoutes: FastifyPluginAsyncTypebox<ApiDeps & { resolver: TokenResolver }> = async (app, { db, resolver }) => {
  app.post(
    '/tokens',
    { schema: { tags: ['tokens'], summary: 'Make a token (admins): admin, member or viewer of projects, a node, or metrics (scrapes GET /metrics only); the token is shown once', body: CreateTokenBody, response: { 201: CreatedTokenSchema } } },
    async (req, reply) => {
      const b = req.body;
      if (b.role === 'node' && !b.node_id) throw new DomainError('invalid', 'a node token needs node_id');
      if (b.role !== 'node' && b.node_id) throw new DomainError('invalid', 'node_id is only for a node token');
      if ((b.role === 'member' || b.role === 'viewer') && !b.projects?.length) throw new DomainError('invalid', `a ${b.role} token needs projects (["*"] for all)`);
      if ((b.role === 'admin' || b.role === 'node' || b.role === 'metrics') && b.projects?.length) throw new DomainError('invalid', `${b.role === 'metrics' ? 'a' : 'an'} ${b.role} token takes no projects`);
      const { row, token } = await createToken(db, { name: b.name, role: b.role, projects: b.projects ?? [], nodeId: b.node_id ?? null });
      return reply.status(201).send({ ...tokenJson(row), token });
    },
  );
  app.get(
    '/tokens',
    { schema: { tags: ['tokens'], summary: 'Tokens (admins), without their secrets', response: { 200: Type.Object({ tokens: Type.Array(TokenSchema) }) } } },
    async () => ({ tokens: (await listTokens(db)).map(tokenJson) }),
  );
  app.delete(
    '/tokens/:id',
    { schema: { tags: ['tokens'], summary: 'Revoke a token (admins); other API replicas stop taking it within 5 s', params: IdParams, response: { 200: TokenSchema, ...NotFound } } },
    async (req) => {
      const row = await revokeToken(db, req.params.id);
      if (!row) throw notFound('token', req.params.id);
      resolver.forget();
      // A node whose last token is gone leaves the pool now (its running jobs go on); it comes back only with a new token.
      if (row.nodeId && !(await nodeHasToken(db, row.nodeId))) await setNodeOffline(db, row.nodeId);
      return tokenJson(row);
    },
  );
  app.get(
    '/whoami',
    { schema: { tags: ['tokens'], summary: 'Who the token is: its role, projects or node', response: { 200: WhoAmISchema } } },
    async (req) => {
      const p = req.principal!;
      if (p.kind === 'admin') return { kind: 'admin', name: p.name, role: 'admin', projects: ['*'], node_id: null };
      if (p.kind === 'user') return { kind: 'user', name: p.name, role: p.role, projects: p.projects, node_id: null };
      if (p.kind === 'node') return { kind: 'node', name: p.name, role: 'node', projects: [], node_id: p.nodeId };
      if (p.kind === 'metrics') return { kind: 'metrics', name: p.name, role: 'metrics', projects: [], node_id: null };
      return { kind: 'run', name: p.runId, role: 'run', projects: [], node_id: p.nodeId };
    },
  );
};
