import { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { Db } from '../../db/client.ts';
import { DEFAULT_LOG_CAP_MIB, formatCap, logCapBytesOf } from '../../domain/log-cap.ts';
import { getJob } from '../../db/queries/jobs.ts';
import { attemptFenced } from '../../db/queries/peers.ts';
import { appendLogChunk, attemptNodes, attemptTimes, listLogRefs, LOG_STREAMS, MAX_LOG_CHUNK, readLogChunks, runAttempt, type LogStream, type StoredChunk } from '../../db/queries/logs.ts';
import type { RunLogRef } from '../../db/schema.ts';
import { DomainError, fencedAttempt, notFound } from '../errors.ts';
import { ErrorBody, IdParams, NotFound } from '../schemas/common.ts';
import { IngestGap, IngestParams, IngestQuery, IngestResult, LogChunk, LogRefSchema, LogText, OFFSET_NEEDS_STREAM, ReadLogsQuery, RefsQuery } from '../schemas/logs.ts';
import type { ApiDeps } from '../deps.ts';

/** Chunks read per stream and query. */
const PAGE = 200;
/** How often a follow looks for new bytes. */
const FOLLOW_POLL_MS = 300;
/** A follow of an ended attempt whose streams never complete (its node died) ends this long after it ended. */
const END_GRACE_MS = 10_000;

interface ReadTarget {
  jobId: string;
  attempt: number;
  /** The gang member whose log is read (0: a single-node job's). */
  rank: number;
  /** How many ranks the attempt has (said in a header, so a reader knows there are others). */
  nodes: number;
  streams: LogStream[];
  offset: number;
  follow: boolean;
}

interface Cursor {
  next: number;
  queue: StoredChunk[];
  /** The last read filled a page: there may be more right now. */
  more: boolean;
  /** Bytes of an unfinished line, held so interleaved streams never splice mid-line. */
  partial: Buffer;
  grew: boolean;
}

const noSuchRank = (jobId: string, attempt: number, rank: number, nodes: number) =>
  new DomainError('invalid', `${jobId}#${attempt} has no rank ${rank}: it spans ${nodes} node${nodes === 1 ? '' : 's'} (ranks 0 to ${nodes - 1})`);

/** The rank a read asks for (default 0), which the attempt must have. */
const rankOf = (q: { rank?: string }, jobId: string, attempt: number, nodes: number) => {
  const rank = Number(q.rank ?? 0);
  if (rank >= nodes) throw noSuchRank(jobId, attempt, rank, nodes);
  return { rank, nodes };
};

const refJson = (r: RunLogRef) => ({
  job_id: r.jobId,
  attempt: r.attempt,
  rank: r.rank,
  stream: r.stream,
  run_id: r.runId,
  node_id: r.nodeId,
  location: r.location,
  size_bytes: r.sizeBytes,
  complete: r.complete,
  updated_at: r.updatedAt.toISOString(),
});

/**
 * An attempt's shipped bytes, in order. With both streams, chunks are merged by arrival time
 * and whole lines are written (a line's start is held until its newline arrives). A follow
 * polls for new bytes until the attempt has ended and its streams are complete.
 */
async function* logBytes(db: Db, t: ReadTarget, stopped: () => boolean): AsyncGenerator<Buffer> {
  const cur = new Map<LogStream, Cursor>(t.streams.map((s) => [s, { next: t.offset, queue: [], more: false, partial: Buffer.alloc(0), grew: false }]));
  const interleave = t.streams.length > 1;
  const fetch = async (s: LogStream, c: Cursor) => {
    const rows = await readLogChunks(db, { jobId: t.jobId, attempt: t.attempt, rank: t.rank, stream: s, from: c.next, limit: PAGE });
    for (const r of rows) {
      const skip = Math.max(0, c.next - r.offset);
      c.next = r.offset + r.data.length;
      if (skip < r.data.length) c.queue.push({ ...r, data: r.data.subarray(skip) });
    }
    c.more = rows.length === PAGE;
    if (rows.length) c.grew = true;
  };
  const lines = (c: Cursor, data: Buffer): Buffer => {
    if (!interleave) return data;
    const all = c.partial.length ? Buffer.concat([c.partial, data]) : data;
    const cut = all.lastIndexOf(10) + 1;
    c.partial = all.subarray(cut);
    return all.subarray(0, cut);
  };
  /** One pass over everything stored now, merged by arrival. */
  async function* round(): AsyncGenerator<Buffer> {
    for (const [s, c] of cur) {
      c.grew = false;
      await fetch(s, c);
    }
    for (;;) {
      for (const [s, c] of cur) if (!c.queue.length && c.more) await fetch(s, c);
      let pick: Cursor | undefined;
      for (const c of cur.values()) if (c.queue.length && (!pick || c.queue[0].at < pick.queue[0].at)) pick = c;
      if (!pick) return;
      const out = lines(pick, pick.queue.shift()!.data);
      if (out.length) yield out;
    }
  }
  const finished = async () => {
    const times = await attemptTimes(db, t.jobId, t.attempt);
    if (!times?.endedAt) return false;
    if (!times.startedAt || Date.now() - times.endedAt.getTime() > END_GRACE_MS) return true;
    const refs = await listLogRefs(db, t.jobId, t.attempt, t.rank);
    return t.streams.every((s) => refs.some((r) => r.stream === s && r.complete));
  };
  for (;;) {
    // Asked before the pass: an attempt whose streams were complete then has nothing after it.
    const done = !t.follow || stopped() || (await finished());
    yield* round();
    for (const c of cur.values()) {
      // A held line start is written once its stream has gone quiet (a progress bar, a prompt).
      if (c.partial.length && (done || !c.grew)) {
        yield c.partial;
        c.partial = Buffer.alloc(0);
      }
    }
    if (done) return;
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
  }
}

export const logRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;
  // What one rank of an attempt keeps, both streams together (GPUPLANE_LOG_CAP_MIB): an agent that ships past it, forged or old, is cut there too.
  const capBytes = deps.logCapBytes === undefined ? logCapBytesOf(DEFAULT_LOG_CAP_MIB) : deps.logCapBytes;
  let closing = false;
  app.addHook('onClose', async () => {
    closing = true;
  });
  // Raw bytes for the ingest route (in this plugin only).
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: MAX_LOG_CHUNK }, (_req, body, done) => done(null, body));

  function sendLog(reply: FastifyReply, t: ReadTarget) {
    let gone = false;
    reply.raw.once('close', () => (gone = true));
    const stream = Readable.from(logBytes(db, t, () => gone || closing), { objectMode: false });
    return reply
      .type('text/plain; charset=utf-8')
      .header('x-gpuplane-job', t.jobId)
      .header('x-gpuplane-attempt', String(t.attempt))
      .header('x-gpuplane-rank', String(t.rank))
      .header('x-gpuplane-nodes', String(t.nodes))
      .header('cache-control', 'no-store')
      .send(stream);
  }

  /** The streams read; an offset came with one (OFFSET_NEEDS_STREAM, in the query schema). */
  const streamsOf = (q: { stream?: 'stdout' | 'stderr' | 'all' }): LogStream[] => {
    const which = q.stream ?? 'all';
    return which === 'all' ? [...LOG_STREAMS] : [which];
  };

  app.post(
    '/jobs/:id/attempts/:attempt/logs/:stream',
    {
      bodyLimit: MAX_LOG_CHUNK,
      schema: {
        tags: ['logs'],
        summary: "Append bytes to an attempt's stdout or stderr (what agents ship)",
        description:
          'The body (application/octet-stream, at most 256 KiB) holds the stream from byte `offset`. Bytes already stored are acknowledged and dropped; an offset past the stored size is 409 with `expected_offset`, from which the shipper resends. `final=true` marks the stream complete. One rank\'s stdout and stderr keep at most GPUPLANE_LOG_CAP_MIB together: the chunk that passes it is cut there and ends with a `gpuplane: log truncated at N MiB` line (`truncated: true`), and its stream is complete (409 for anything more). An attempt fenced because its node was declared dead (issue 46) takes no bytes at all: 409 with `complete: true`, nothing stored. A gang member ships with `rank=R`: each rank\'s streams are stored apart; a rank the attempt does not have is 400.',
        consumes: ['application/octet-stream'],
        body: LogChunk,
        params: IngestParams,
        querystring: IngestQuery,
        response: { 200: IngestResult, 400: ErrorBody, ...NotFound, 409: IngestGap },
      },
    },
    async (req, reply) => {
      const data = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const { id: jobId, stream } = req.params;
      const attempt = Number(req.params.attempt);
      const q = req.query;
      const rank = Number(q.rank ?? 0);
      const r = await db.transaction(async (tx) => {
        const nodes = await attemptNodes(tx, jobId, attempt);
        if (nodes === undefined) {
          if (!(await getJob(tx, jobId))) throw notFound('job', jobId);
          throw notFound('attempt', `${jobId}#${attempt}`);
        }
        if (rank >= nodes) throw noSuchRank(jobId, attempt, rank, nodes);
        // Bytes of an attempt whose node was declared dead are refused, however old: what was
        // stored before the fence stays, and the answer says the stream is complete, so the
        // node's shipper stops (the file stays on the node).
        if (await attemptFenced(tx, jobId, attempt)) {
          const stored = (await listLogRefs(tx, jobId, attempt, rank)).find((x) => x.stream === stream)?.sizeBytes ?? 0;
          return { kind: 'fenced' as const, stored };
        }
        return appendLogChunk(tx, { jobId, attempt, rank, stream, offset: Number(q.offset), data, final: q.final === 'true', nodeId: q.node ?? null, location: q.location ?? null, capBytes });
      });
      const what = `${stream} of ${jobId}#${attempt}${rank ? ` rank ${rank}` : ''}`;
      if (r.kind === 'fenced') {
        return reply.status(409).send({ error: 'conflict', message: `${fencedAttempt(jobId, attempt).message}; ${what} takes no new bytes`, expected_offset: r.stored, complete: true });
      }
      if (r.kind === 'gap') {
        return reply.status(409).send({ error: 'conflict', message: `${what} has ${r.expected} bytes stored; resend from offset ${r.expected}`, expected_offset: r.expected, complete: false });
      }
      if (r.kind === 'complete') {
        const why = r.truncated ? `was truncated at the log cap (${formatCap(capBytes!)} a rank of an attempt)` : `is complete at ${r.sizeBytes} bytes`;
        return reply.status(409).send({ error: 'conflict', message: `${what} ${why}; it takes no new bytes`, expected_offset: r.sizeBytes, complete: true });
      }
      return { size_bytes: r.sizeBytes, stored_bytes: r.storedBytes, complete: r.complete, ...(r.truncated ? { truncated: true } : {}) };
    },
  );

  app.get(
    '/jobs/:id/logs',
    {
      schema: {
        tags: ['logs'],
        summary: "An attempt's shipped stdout/stderr as text (of one rank of a gang); follow=true streams it as it arrives",
        params: IdParams,
        querystring: ReadLogsQuery,
        response: { 200: LogText, 400: ErrorBody, ...NotFound },
      },
    },
    async (req, reply) => {
      const job = await getJob(db, req.params.id);
      if (!job) throw notFound('job', req.params.id);
      const q = req.query;
      const attempt = q.attempt === undefined ? job.attempt : Number(q.attempt);
      const nodes = await attemptNodes(db, job.id, attempt);
      if (nodes === undefined) throw notFound('attempt', `${job.id}#${attempt}`);
      return sendLog(reply, { jobId: job.id, attempt, ...rankOf(q, job.id, attempt, nodes), streams: streamsOf(q), offset: Number(q.offset ?? 0), follow: q.follow === 'true' });
    },
  );

  app.get(
    '/runs/:id/logs',
    {
      schema: {
        tags: ['logs'],
        summary: "The shipped stdout/stderr of a job's Run (its attempt); follow=true streams it",
        params: IdParams,
        querystring: Type.Omit(ReadLogsQuery, ['attempt'], OFFSET_NEEDS_STREAM),
        response: { 200: LogText, 400: ErrorBody, ...NotFound },
      },
    },
    async (req, reply) => {
      const run = await runAttempt(db, req.params.id);
      if (!run) throw notFound('run', req.params.id);
      if (!run.jobId || run.attempt === null) throw new DomainError('not_found', `run ${req.params.id} was not made by a job, so it has no shipped logs`);
      const q = req.query;
      const nodes = (await attemptNodes(db, run.jobId, run.attempt)) ?? 1;
      return sendLog(reply, { jobId: run.jobId, attempt: run.attempt, ...rankOf(q, run.jobId, run.attempt, nodes), streams: streamsOf(q), offset: Number(q.offset ?? 0), follow: q.follow === 'true' });
    },
  );

  app.get(
    '/jobs/:id/logs/refs',
    {
      schema: {
        tags: ['logs'],
        summary: "Where each attempt's streams (each rank's, for a gang) were shipped from, their size and whether they are complete",
        params: IdParams,
        querystring: RefsQuery,
        response: { 200: Type.Object({ refs: Type.Array(LogRefSchema) }), 404: ErrorBody, 400: ErrorBody },
      },
    },
    async (req) => {
      const job = await getJob(db, req.params.id);
      if (!job) throw notFound('job', req.params.id);
      const q = req.query;
      const refs = await listLogRefs(db, job.id, q.attempt === undefined ? undefined : Number(q.attempt), q.rank === undefined ? undefined : Number(q.rank));
      return { refs: refs.map(refJson) };
    },
  );
};
