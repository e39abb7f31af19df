/**
 * Code snapshots (docs/storage.md "Code snapshots"). `gpuctl submit --code` asks whether the
 * project has a snapshot (HEAD /code/:sha256?project=) and uploads it only when not (PUT, the tar
 * as the body, hashed as it arrives: another hash is refused and nothing is kept). A node whose
 * agent has no store of its own (GPUPLANE_STORAGE=local) reads an attempt's code through
 * GET /jobs/:id/attempts/:attempt/code with its node token.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { Readable } from 'node:stream';
import { expiredCodeWorkdirs } from '../../db/queries/code-workdirs.ts';
import { getJob } from '../../db/queries/jobs.ts';
import { findProjectId, ensureProject } from '../../db/queries/projects.ts';
import { codeStore, receiveCode, storedCode } from '../code-store.ts';
import type { ApiDeps } from '../deps.ts';
import { DomainError, notFound } from '../errors.ts';
import { CodeInfoSchema, CodeParams, CodeQuery } from '../schemas/code.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';

const TarBody = {
  description: "a code snapshot: a tar of the folder's files under one top folder `code/`",
  content: { 'application/x-tar': { schema: Type.String({ format: 'binary' }) } },
};
/** The upload's body: bytes, read as a stream by the handler (no schema of a parsed body applies). */
const TarUpload = Type.Unsafe<Readable>({ description: "a code snapshot (application/x-tar): a tar of the folder's files under one top folder `code/`, whose sha256 is the one named" });
const AttemptParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }), attempt: Type.String({ pattern: '^[1-9][0-9]{0,6}$' }) });
const info = (o: { key: string; size: number }, sha256: string) => ({ sha256, bytes: o.size, key: o.key });
const JOB_ID = '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
const WorkdirsBody = Type.Object(
  {
    jobs: Type.Array(Type.String({ pattern: JOB_ID }), { maxItems: 1000, description: 'the jobs whose unpacked code the node holds (its folders under /var/tmp/gpuplane-code)' }),
    older_than_s: Type.Integer({ minimum: 0, maximum: 10 * 365 * 24 * 3600, description: "the node's keep period (GPUPLANE_CODE_WORKDIR_KEEP_S): a job that ended since is kept" }),
  },
  { additionalProperties: false },
);

export const codeRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, store }) => {
  // The body is the tar's bytes, read by the handler as a stream (no size limit of a parsed body: the handler counts).
  app.addContentTypeParser('application/x-tar', (_req, payload, done) => done(null, payload));

  app.get(
    '/code/:sha256',
    {
      schema: {
        tags: ['code'],
        summary: "Whether a project has a code snapshot (HEAD: gpuctl submit --code asks before it uploads); 404 when not",
        params: CodeParams,
        querystring: CodeQuery,
        response: { 200: CodeInfoSchema, ...NotFound, ...Conflict },
      },
    },
    async (req) => {
      const s = codeStore(store);
      const projectId = req.query.project ? await findProjectId(db, req.query.project) : null;
      const o = projectId === undefined ? null : await storedCode(s, projectId, req.params.sha256);
      if (!o) throw notFound('code snapshot', req.params.sha256);
      return info(o, req.params.sha256);
    },
  );

  app.put(
    '/code/:sha256',
    {
      schema: {
        tags: ['code'],
        summary: "Uploads a code snapshot for a project: the body's sha256 must be the one named (400 else, nothing kept); one already there is kept as it is",
        params: CodeParams,
        querystring: CodeQuery,
        body: TarUpload,
        consumes: ['application/x-tar'],
        response: { 200: CodeInfoSchema, 201: CodeInfoSchema, ...Conflict },
      },
    },
    async (req, reply) => {
      const s = codeStore(store);
      const { sha256 } = req.params;
      const projectId = req.query.project ? await ensureProject(db, req.query.project) : null;
      const body = req.body as Readable | undefined;
      if (!body || typeof body.pipe !== 'function') throw new DomainError('invalid', 'the body is a tar (Content-Type: application/x-tar)');
      const there = await storedCode(s, projectId, sha256);
      if (there) {
        body.resume();
        return reply.status(200).send(info(there, sha256));
      }
      return reply.status(201).send(info(await receiveCode(s, projectId, sha256, body), sha256));
    },
  );

  app.get(
    '/jobs/:id/attempts/:attempt/code',
    {
      schema: {
        tags: ['code'],
        summary: "The code snapshot of a live attempt's job, for the agent of its node (node tokens only)",
        params: AttemptParams,
        response: { 200: TarBody, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const job = await getJob(db, req.params.id);
      if (!job) throw notFound('job', req.params.id);
      if (!job.code) throw new DomainError('conflict', `job ${job.id} runs no code snapshot`);
      const body = await codeStore(store).get(job.code.key);
      return (reply as FastifyReply).type('application/x-tar').header('x-gpuplane-sha256', job.code.sha256).header('cache-control', 'no-store').send(body);
    },
  );

  app.post(
    '/nodes/:id/code-workdirs/expired',
    {
      schema: {
        tags: ['code'],
        summary:
          "Of the jobs whose unpacked code a node holds, those it may delete (its node token): ended more than older_than_s ago, with no checkpoint of theirs still kept only in that folder (not deleted, not stored)",
        params: IdParams,
        body: WorkdirsBody,
        response: { 200: Type.Object({ expired: Type.Array(Type.String()) }) },
      },
    },
    async (req) => ({ expired: await expiredCodeWorkdirs(db, req.params.id, req.body.jobs, new Date(Date.now() - req.body.older_than_s * 1000)) }),
  );
};
