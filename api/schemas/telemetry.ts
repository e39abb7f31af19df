import { Type } from '@sinclair/typebox';
import { Nullable } from './common.ts';

const Card = Type.Object(
  {
    index: Type.Integer({ minimum: 0, maximum: 1023 }),
    utilization: Type.Number({ minimum: 0, maximum: 100, description: 'percent: the highest seen since the last report' }),
    memory_used_mb: Type.Number({ minimum: 0 }),
    memory_total_mb: Type.Number({ minimum: 0 }),
    power_w: Nullable(Type.Number({ minimum: 0 })),
    temperature_c: Nullable(Type.Number()),
  },
  { additionalProperties: false },
);

const Attempt = Type.Object(
  {
    job_id: Type.String({ minLength: 1, maxLength: 128 }),
    // The database's attempt is an int4: a larger one is no attempt of ours, refused here rather than overflowing the query.
    attempt: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }),
    rank: Type.Integer({ minimum: 0, maximum: 4095, description: "this node's rank in the attempt (0 for a single-node job)" }),
    gpu_indices: Type.Array(Type.Integer({ minimum: 0, maximum: 1023 }), { maxItems: 64 }),
    elapsed_s: Type.Number({ minimum: 0, maximum: 1e9, description: 'seconds since the process started: the step of its system metrics' }),
    cpu_percent: Type.Number({ minimum: 0, description: "percent of one core, summed over the attempt's process group, since the last report" }),
    rss_bytes: Type.Number({ minimum: 0 }),
    log_bytes: Type.Number({ minimum: 0, description: 'bytes of stdout and stderr written so far' }),
  },
  { additionalProperties: false },
);

export const TelemetryBody = Type.Object(
  {
    at: Type.Number({ minimum: 0, description: 'epoch ms of the samples' }),
    interval_s: Type.Number({ minimum: 0.1, maximum: 3600, description: "the agent's GPUPLANE_TELEMETRY_S" }),
    cards: Type.Array(Card, { maxItems: 64 }),
    attempts: Type.Array(Attempt, { maxItems: 256 }),
  },
  { additionalProperties: false },
);

export const TelemetryAnswer = Type.Object({
  attempts: Type.Integer({ description: 'attempts of the report that run on this node now (the others are ignored)' }),
  stalled: Type.Array(Type.String(), { description: 'jobs found stalled by this report' }),
});
