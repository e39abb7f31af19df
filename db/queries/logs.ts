import { and, asc, desc, eq, gt, gte, sql } from 'drizzle-orm';
import type { Executor, Tx } from '../client.ts';
import { jobAttempts, logChunks, runLogRefs, runs, type RunLogRef } from '../schema.ts';
import { runOfAttempt } from './attempt-run.ts';
import { roomUnderCap, truncationLine } from '../../domain/log-cap.ts';

export const LOG_STREAMS = ['stdout', 'stderr'] as const;
export type LogStream = (typeof LOG_STREAMS)[number];
/** The largest chunk the API stores; reads look back this far for the chunk that holds an offset. */
export const MAX_LOG_CHUNK = 256 * 1024;

export type AppendResult =
  /** Stored (or already held: an overlap is trimmed, a full repeat stores nothing). `truncated`: cut at the cap, its line appended, the stream complete. */
  | { kind: 'stored'; sizeBytes: number; complete: boolean; storedBytes: number; truncated?: true }
  /** The chunk starts past what is stored: the shipper must resend from `expected`. */
  | { kind: 'gap'; expected: number }
  /** New bytes for a stream already marked complete (`truncated`: its rank's streams reached the cap). */
  | { kind: 'complete'; sizeBytes: number; truncated: boolean };

export interface AppendChunk {
  jobId: string;
  attempt: number;
  /** The gang member that wrote it (0 for a single-node job): each rank's streams are its own. */
  rank: number;
  stream: LogStream;
  offset: number;
  data: Buffer;
  /** The shipper has sent everything: the process ended and this chunk is its last. */
  final: boolean;
  nodeId: string | null;
  location: string | null;
  /** The most bytes the rank's streams keep together (domain/log-cap.ts); null or absent: no cap. */
  capBytes?: number | null;
}

/**
 * appendLogChunk appends a chunk at `offset` of an attempt's (rank's) stream, in the caller's transaction. The rank's
 * ref rows are locked first, in stream order, so two shippers of one attempt (an agent and its successor) never
 * store the same bytes twice: bytes already held are acknowledged and dropped, and a chunk that
 * would leave a hole is refused. With a cap, the chunk that would take the rank's streams past it is cut at the cap,
 * ends with the truncation line, and completes its stream; the other stream's next bytes get only the line.
 */
export async function appendLogChunk(tx: Tx, c: AppendChunk): Promise<AppendResult> {
  const rankKey = and(eq(runLogRefs.jobId, c.jobId), eq(runLogRefs.attempt, c.attempt), eq(runLogRefs.rank, c.rank));
  const key = and(rankKey, eq(runLogRefs.stream, c.stream));
  // Both streams' rows, always in one order: the cap weighs them together, and two appends never wait on each other crosswise.
  const held = await tx.select().from(runLogRefs).where(rankKey).orderBy(asc(runLogRefs.stream)).for('update');
  let ref = held.find((r) => r.stream === c.stream);
  const others = held.filter((r) => r.stream !== c.stream).reduce((n, r) => n + r.sizeBytes, 0);
  const cap = c.capBytes ?? null;
  if (!ref) {
    // A first chunk that does not start at 0 is refused before anything is written.
    if (c.offset > 0) return { kind: 'gap', expected: 0 };
    await tx.insert(runLogRefs).values({ jobId: c.jobId, attempt: c.attempt, rank: c.rank, stream: c.stream }).onConflictDoNothing();
    [ref] = await tx.select().from(runLogRefs).where(key).for('update');
  }
  const stored = ref.sizeBytes;
  // A complete stream takes nothing past its end, wherever the chunk starts (a truncated one's file goes on past it).
  if (ref.complete && c.offset + c.data.length > stored) return { kind: 'complete', sizeBytes: stored, truncated: cap !== null && others + stored >= cap };
  if (c.offset > stored) return { kind: 'gap', expected: stored };
  let fresh = c.data.subarray(Math.min(c.data.length, stored - c.offset));
  const room = roomUnderCap(cap, others + stored, fresh.length);
  if (room !== null) {
    const kept = fresh.subarray(0, room);
    // The line starts a line of its own, wherever the cut fell.
    const before = kept.length ? kept[kept.length - 1] : stored > 0 ? await lastByte(tx, c) : 10;
    const line = truncationLine(cap!, c.nodeId ?? ref.nodeId, c.location ?? ref.location);
    fresh = Buffer.concat([kept, Buffer.from(before === 10 ? line : `\n${line}`)]);
  }
  if (fresh.length > 0) await tx.insert(logChunks).values({ jobId: c.jobId, attempt: c.attempt, rank: c.rank, stream: c.stream, offset: stored, data: Buffer.from(fresh) });
  const runId = ref.runId ?? (await runOfAttempt(tx, c.jobId, c.attempt));
  const sizeBytes = stored + fresh.length;
  const complete = ref.complete || c.final || room !== null;
  await tx
    .update(runLogRefs)
    .set({
      sizeBytes,
      complete,
      runId,
      nodeId: c.nodeId ?? ref.nodeId,
      location: c.location ?? ref.location,
      updatedAt: new Date(),
    })
    .where(key);
  return { kind: 'stored', sizeBytes, complete, storedBytes: fresh.length, ...(room !== null ? { truncated: true as const } : {}) };
}

/** The last stored byte of a stream that has some. */
async function lastByte(ex: Executor, c: { jobId: string; attempt: number; rank: number; stream: LogStream }): Promise<number> {
  const [row] = await ex
    .select({ b: sql<number>`get_byte(${logChunks.data}, octet_length(${logChunks.data}) - 1)` })
    .from(logChunks)
    .where(and(eq(logChunks.jobId, c.jobId), eq(logChunks.attempt, c.attempt), eq(logChunks.rank, c.rank), eq(logChunks.stream, c.stream)))
    .orderBy(desc(logChunks.offset))
    .limit(1);
  return row ? Number(row.b) : 10;
}

/**
 * attemptNodes returns how many nodes (ranks) a job's attempt `attempt` spans, as its config says (1 for an attempt
 * recorded before gangs); undefined when the job has no such attempt.
 */
export async function attemptNodes(ex: Executor, jobId: string, attempt: number): Promise<number | undefined> {
  const [row] = await ex
    .select({ config: jobAttempts.config })
    .from(jobAttempts)
    .where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)));
  return row && (row.config.nodes ?? 1);
}

/**
 * listLogRefs returns the streams of a job's attempts (of one attempt, and of one rank, when given), by attempt, rank,
 * then stream.
 */
export async function listLogRefs(ex: Executor, jobId: string, attempt?: number, rank?: number): Promise<RunLogRef[]> {
  return ex
    .select()
    .from(runLogRefs)
    .where(
      and(
        eq(runLogRefs.jobId, jobId),
        attempt === undefined ? undefined : eq(runLogRefs.attempt, attempt),
        rank === undefined ? undefined : eq(runLogRefs.rank, rank),
      ),
    )
    .orderBy(asc(runLogRefs.attempt), asc(runLogRefs.rank), asc(runLogRefs.stream));
}

export interface StoredChunk {
  stream: LogStream;
  offset: number;
  data: Buffer;
  at: Date;
}

/**
 * readLogChunks returns up to `limit` chunks of a (rank's) stream from byte `from` on, in order; the first may start before
 * `from` (the caller trims it). Chunks are contiguous: the API never stores a hole.
 */
export async function readLogChunks(ex: Executor, q: { jobId: string; attempt: number; rank: number; stream: LogStream; from: number; limit: number }): Promise<StoredChunk[]> {
  const rows = await ex
    .select({ offset: logChunks.offset, data: logChunks.data, at: logChunks.at })
    .from(logChunks)
    .where(
      and(
        eq(logChunks.jobId, q.jobId),
        eq(logChunks.attempt, q.attempt),
        eq(logChunks.rank, q.rank),
        eq(logChunks.stream, q.stream),
        // The index narrows to one chunk's length before the offset; the length test keeps the one that holds it.
        gte(logChunks.offset, q.from - MAX_LOG_CHUNK),
        gt(sql`${logChunks.offset} + octet_length(${logChunks.data})`, q.from),
      ),
    )
    .orderBy(asc(logChunks.offset))
    .limit(q.limit);
  return rows.map((r) => ({ stream: q.stream, offset: Number(r.offset), data: Buffer.from(r.data), at: r.at }));
}

/**
 * readLogTail returns the last `bytes` of each shipped stream (stdout, then stderr) of one rank (rank 0, a
 * single-node job's, unless told), for failure hints; null when nothing of it was shipped.
 */
export async function readLogTail(ex: Executor, jobId: string, attempt: number, bytes = 8192, rank = 0): Promise<string | null> {
  const refs = await listLogRefs(ex, jobId, attempt, rank);
  if (!refs.some((r) => r.sizeBytes > 0)) return null;
  const parts: string[] = [];
  for (const stream of LOG_STREAMS) {
    const ref = refs.find((r) => r.stream === stream);
    if (!ref || ref.sizeBytes === 0) continue;
    const from = Math.max(0, ref.sizeBytes - bytes);
    const chunks = await readLogChunks(ex, { jobId, attempt, rank, stream, from, limit: bytes + 1 });
    const all = Buffer.concat(chunks.map((c) => c.data));
    const start = chunks.length ? from - chunks[0].offset : 0;
    parts.push(all.subarray(Math.max(0, start)).toString('utf8'));
  }
  return parts.join('\n');
}

/** attemptTimes returns when an attempt ended (null while it runs or waits), and whether it ever started. */
export async function attemptTimes(ex: Executor, jobId: string, attempt: number): Promise<{ startedAt: Date | null; endedAt: Date | null } | undefined> {
  const [row] = await ex
    .select({ startedAt: jobAttempts.startedAt, endedAt: jobAttempts.endedAt })
    .from(jobAttempts)
    .where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)));
  return row;
}

/** runAttempt returns the job and attempt of a Run (null job for an SDK run), or undefined when no such run. */
export async function runAttempt(ex: Executor, runId: string): Promise<{ jobId: string | null; attempt: number | null } | undefined> {
  const [row] = await ex.select({ jobId: runs.jobId, attempt: runs.attempt }).from(runs).where(eq(runs.id, runId));
  return row;
}
