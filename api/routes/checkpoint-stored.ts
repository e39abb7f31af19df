/**
 * POST /jobs/:id/attempts/:attempt/checkpoints/stored: a node says it stored one of the job's
 * checkpoints in the plane's object store (under a key, verified against the fingerprint), or
 * could not (docs/storage.md). Node tokens of the node the attempt was dispatched to only.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import { markCheckpointStored } from '../../db/queries/checkpoint-register.ts';
import { pendingUploadsOf } from '../../db/queries/checkpoint-uploads.ts';
import { identityOf } from '../../db/queries/project-identity.ts';
import { attemptStateAndNode } from '../../db/queries/launch.ts';
import { attemptFenced } from '../../db/queries/peers.ts';
import type { ApiDeps } from '../deps.ts';
import { DomainError, fencedAttempt, notFound } from '../errors.ts';
import { getCheckpoint } from '../../db/queries/checkpoints.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
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

const PendingUploads = Type.Object({
  uploads: Type.Array(
    Type.Object({
      job_id: Type.String(),
      attempt: Type.Integer(),
      run_id: Type.String(),
      uri: Type.String(),
      fingerprint: Type.String(),
      project: Type.Union([Type.String(), Type.Null()]),
      run_as: Type.Union([Type.Object({ uid: Type.Integer(), gid: Type.Integer(), name: Type.String(), source: Type.String(), slot: Type.Union([Type.Integer(), Type.Null()]) }), Type.Null()], { description: "the project's job identity, which packs the files" }),
    }),
  ),
});

const TarBody = {
  description: "the checkpoint's stored copy: a tar of the file or folder under its own name (x-gpuplane-fingerprint: the registered fingerprint, which its files hash to)",
  content: { 'application/x-tar': { schema: Type.String({ format: 'binary' }) } },
};

export const checkpointStoredRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, store }) => {
  app.get(
    '/checkpoints/:id/download',
    {
      schema: {
        tags: ['checkpoints'],
        summary: "A stored checkpoint's files, as a tar, from the plane's object store (gpuctl checkpoint download ID [DIR]); 409 while it is not stored",
        params: IdParams,
        response: { 200: TarBody, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const c = await getCheckpoint(db, req.params.id);
      if (!c) throw notFound('checkpoint', req.params.id);
      if (c.deletedAt) throw new DomainError('conflict', `checkpoint ${c.id} is not in the plane's store: retention deleted its files (and its stored copy) at ${c.deletedAt.toISOString()}`);
      if (c.storage !== 'stored' || !c.storeKey || !store) {
        const state = !store || c.storage === null ? "the plane keeps checkpoints only where they were written (GPUPLANE_STORAGE=local): read it on its node" : c.storage === 'failed' ? `storing it failed: ${c.storageReason ?? ''}` : 'its node is still uploading it';
        throw new DomainError('conflict', `checkpoint ${c.id} is not in the plane's store: ${state} (${c.uri} on ${c.nodeId ?? 'its node'})`);
      }
      const body = await store.get(c.storeKey);
      // A stream, as the logs are sent: the typed reply knows only the schema's string.
      return (reply as FastifyReply)
        .type('application/x-tar')
        .header('x-gpuplane-fingerprint', c.fingerprint)
        .header('content-disposition', `attachment; filename="${c.id}.tar"`)
        .header('cache-control', 'no-store')
        .send(body);
    },
  );

  app.get(
    '/nodes/:id/checkpoints/pending',
    {
      schema: {
        tags: ['checkpoints'],
        summary: "The node's checkpoints not stored yet (its node token): an agent that starts again takes their uploads up again",
        params: IdParams,
        response: { 200: PendingUploads },
      },
    },
    async (req) => {
      const identities = new Map<string | null, Awaited<ReturnType<typeof identityOf>>>();
      const uploads = [];
      for (const u of await pendingUploadsOf(db, req.params.id)) {
        if (!identities.has(u.projectId)) identities.set(u.projectId, await identityOf(db, u.projectId));
        const i = identities.get(u.projectId) ?? null;
        uploads.push({ job_id: u.jobId, attempt: u.attempt, run_id: u.runId, uri: u.uri, fingerprint: u.fingerprint, project: u.projectId, run_as: i && { uid: i.uid, gid: i.gid, name: i.name, source: i.source, slot: i.slot } });
      }
      return { uploads };
    },
  );

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
      if (await attemptFenced(db, id, attempt)) throw fencedAttempt(id, attempt);
      const b = req.body;
      const base = { jobId: id, uri: b.uri, fingerprint: b.fingerprint };
      const updated = await markCheckpointStored(db, b.key !== undefined ? { ...base, key: b.key, storedBytes: b.stored_bytes ?? 0 } : { ...base, failed: b.failed! });
      if (typeof updated === 'object') {
        // Retention let it go while its node was uploading it: the copy goes too.
        if (b.key !== undefined && store) await store.delete({ keys: [updated.deletedKey] });
        return { updated: 0 };
      }
      if (updated === 0) throw new DomainError('conflict', `job ${id} has no checkpoint ${b.uri} (${b.fingerprint}) registered yet`);
      return { updated };
    },
  );
};
