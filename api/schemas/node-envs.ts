import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';

const HEX64 = '^[0-9a-f]{64}$';
/** Bytes as a JSON number: at most 2^53, past any disk. */
const Bytes = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });

/** One Python environment a node holds (docs/environments.md). */
export const NodeEnvSchema = Type.Object(
  {
    key: Type.String({ pattern: HEX64, description: "the cache key: the environment's folder under the node's GPUPLANE_ENV_CACHE_DIR" }),
    kind: Type.String({ minLength: 1, maxLength: 32, description: 'requirements: built from a requirements.txt' }),
    sha256: Type.String({ pattern: HEX64, description: 'sha256 of the file it was built from' }),
    bytes: Bytes('its size on disk, measured once after its build'),
    built_at: Nullable(Type.String({ format: 'date-time', maxLength: 40 })),
    last_used_at: Type.String({ format: 'date-time', maxLength: 40, description: 'when an attempt last took it or gave it back' }),
    in_use: Type.Integer({ minimum: 0, maximum: 100_000, description: 'attempts on the node running in it now: never evicted while above 0' }),
  },
  { additionalProperties: false },
);
export type NodeEnvJson = Static<typeof NodeEnvSchema>;

/** An agent's report of its cache (its node token): the whole list, replacing the last one. */
export const NodeEnvsBody = Type.Object(
  {
    bound_bytes: Bytes('the cache\'s bound (gpuctl agent --env-cache-size)'),
    envs: Type.Array(NodeEnvSchema, { maxItems: 10_000 }),
  },
  { additionalProperties: false },
);
export type NodeEnvsBodyJson = Static<typeof NodeEnvsBody>;

/** GET /nodes/{id}/envs. */
export const NodeEnvsAnswer = Type.Object({
  node_id: Type.String(),
  reported_at: Nullable(Type.String({ format: 'date-time', description: 'when its agent last reported; null: never (an agent of before, or not started since)' })),
  bound_bytes: Nullable(Type.Integer({ minimum: 0 })),
  total_bytes: Type.Integer({ minimum: 0 }),
  envs: Type.Array(NodeEnvSchema, { description: 'least recently used first: the order they would be evicted in' }),
});
export type NodeEnvsAnswerJson = Static<typeof NodeEnvsAnswer>;
