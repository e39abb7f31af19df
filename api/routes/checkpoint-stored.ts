/**
 * POST /jobs/:id/attempts/:attempt/checkpoints/stored: a node says it stored one of the job's
 * checkpoints in the plane's object store (under a key, verified against the fingerprint), or
 * could not (docs/storage.md). Node tokens of the node the attempt was dispatched to only.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { markCheckpointStored } from '../../db/queries/checkpoint-register.ts';
import { attemptStateAndNode } from '../../db/queries/launch.ts';
import type { ApiDeps } from '../deps.ts';
import { DomainError, notFound } from '../errors.ts';
import { Conflict, NotFound } from '../schemas/common.ts';
import { exactlyOne } from '../schemas/rules.ts';

const Params = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }), attempt: Type.String({ pattern: '^[1-9][0-9]{0,6}$' }) });

export const StoredBody = Type.Object(
  {
    uri: Type.String({ minLength: 1, maxLength: 4096, description: 'the checkpoint as registered: its path on the node' }),
    fingerprint: Type.String({ pattern: '^sha256:[0-9a-f]{64}$', description: 'its registered fingerprint, which the stored copy was verified against' }),
    key: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: "the object's key in the plane's store" })),
    stored_bytes: Type.Optional(Type.Integer({ minimum: 0, description: "the object's size" })),
    failed: Type.Optional(Type.String({ minLength: 1, maxLength: 2000, description: 'why it could not be stored' })),
  },
  { additionalProperties: false, allOf: [exactlyOne(['key', 'failed'], 'give key (stored) or failed (why not), one of them')] },
);

export const checkpointStoredRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  app.post(
    '/jobs/:id/attempts/:attempt/checkpoints/stored',
    {
      schema: {
        tags: ['checkpoints'],
        summary: "A node stored one of the attempt's checkpoints in the plane's object store, or could not (node tokens of the node it was dispatched to only)",
        description: 'A 409 while the checkpoint is not registered yet: the node asks again.',
        params: Params,
        body: StoredBody,
        response: { 200: Type.Object({ updated: Type.Integer() }), ...NotFound, ...Conflict },
      },
    },
    async (req) => {
      const { id } = req.params;
      const attempt = Number(req.params.attempt);
      if (!(await attemptStateAndNode(db, id, attempt))) throw notFound('attempt', `${id}#${attempt}`);
      const b = req.body;
      const base = { jobId: id, uri: b.uri, fingerprint: b.fingerprint };
      const updated = await markCheckpointStored(db, b.key !== undefined ? { ...base, key: b.key, storedBytes: b.stored_bytes ?? 0 } : { ...base, failed: b.failed! });
      if (updated === 0) throw new DomainError('conflict', `job ${id} has no checkpoint ${b.uri} (${b.fingerprint}) registered yet`);
      return { updated };
    },
  );
};
