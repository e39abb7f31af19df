import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';

const StreamName = Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]);
/** Query values arrive as strings (types are not coerced): integers are spelt out by pattern. */
const UInt = (description: string) => Type.String({ pattern: '^[0-9]{1,15}$', description });

/** A gang member's rank: 0 to 1023 as a query string; 0 is a single-node job's only one. */
const RankQuery = (description: string) => Type.Optional(Type.String({ pattern: '^(?:0|[1-9][0-9]{0,2}|10[01][0-9]|102[0-3])$', description }));

export const IngestParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 128 }),
  attempt: Type.String({ pattern: '^[1-9][0-9]{0,8}$' }),
  stream: StreamName,
});

export const IngestQuery = Type.Object(
  {
    offset: UInt('byte offset of the body in the stream: must be at most the stored size (409 otherwise)'),
    rank: RankQuery("the gang member (0 to 1023) whose stream this is; default 0, a single-node job's only rank. Each rank's streams are stored apart"),
    final: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'the process ended and this body holds the last bytes' })),
    node: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'node the stream is shipped from' })),
    location: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: "the stream's file on its node" })),
  },
  { additionalProperties: false },
);

export const IngestResult = Type.Object({
  size_bytes: Type.Integer({ description: 'bytes stored for the stream, after this body' }),
  stored_bytes: Type.Integer({ description: 'bytes of this body that were new' }),
  complete: Type.Boolean(),
  truncated: Type.Optional(Type.Boolean({ description: "true when this body took the rank's streams to the log cap: it was cut there, the truncation line appended, and the stream is complete" })),
});

export const IngestGap = Type.Object({
  error: Type.String(),
  message: Type.String(),
  expected_offset: Type.Integer({ description: 'the stored size: resend from this byte' }),
  complete: Type.Boolean({ description: 'the stream is complete and takes no new bytes' }),
});

/** An offset is a byte of one stream: it needs stream=stdout or stream=stderr. */
export const OFFSET_NEEDS_STREAM = {
  description: 'offset needs one stream: add stream=stdout or stream=stderr',
  not: { required: ['offset'], not: { required: ['stream'], properties: { stream: { enum: ['stdout', 'stderr'] } } } },
};

export const ReadLogsQuery = Type.Object(
  {
    attempt: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,8}$', description: "default: the job's current attempt" })),
    rank: RankQuery("which gang member's log (0 to 1023); default 0, a single-node job's only rank"),
    stream: Type.Optional(Type.Union([Type.Literal('stdout'), Type.Literal('stderr'), Type.Literal('all')], { description: 'default all: both streams, interleaved line by line in arrival order' })),
    offset: Type.Optional(UInt('start at this byte of the stream (one stream only)')),
    follow: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'keep the response open and send bytes as they arrive, until the attempt ended and its streams are complete' })),
  },
  { additionalProperties: false, ...OFFSET_NEEDS_STREAM },
);
export type ReadLogsQuery = Static<typeof ReadLogsQuery>;

export const RefsQuery = Type.Object(
  {
    attempt: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,8}$' })),
    rank: RankQuery("only this gang member's streams (0 to 1023); default every rank's"),
  },
  { additionalProperties: false },
);

export const LogRefSchema = Type.Object({
  job_id: Type.String(),
  attempt: Type.Integer(),
  rank: Type.Integer({ minimum: 0, description: "the gang member whose stream it is (0 for a single-node job): ranks' streams are kept apart" }),
  stream: StreamName,
  run_id: Nullable(Type.String()),
  node_id: Nullable(Type.String()),
  location: Nullable(Type.String({ description: "the stream's file on its node (for an operator; read logs through the API)" })),
  size_bytes: Type.Integer(),
  complete: Type.Boolean({ description: 'the process ended and every byte was shipped' }),
  updated_at: Type.String({ format: 'date-time' }),
});

/**
 * A 200 of a log read: the bytes as text/plain (UTF-8), the whole of what is stored, or with
 * follow=true a response that stays open and sends bytes as they arrive. Errors are JSON.
 */
export const LogText = {
  description: 'the log bytes as text (follow=true: sent as they arrive, until the attempt ended and its streams are complete); headers x-gpuplane-job, x-gpuplane-attempt and x-gpuplane-rank name what was read, and x-gpuplane-nodes how many ranks (nodes) the attempt has',
  content: { 'text/plain': { schema: Type.String({ description: 'the log bytes' }) } },
};

/** The body of a log chunk: raw bytes, not JSON (any schema would be checked against a Buffer). */
export const LogChunk = Type.Unsafe<Buffer>({ description: "the stream's bytes from `offset` (application/octet-stream, at most 256 KiB)" });
