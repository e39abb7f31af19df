import { Type } from '@sinclair/typebox';
import { Nullable, StringMap } from './common.ts';

export const SlotSchema = Type.Object({
  index: Type.Integer(),
  uuid: Type.String(),
  name: Type.String(),
  memory_mb: Type.Integer(),
  present: Type.Boolean(),
  owner_job_id: Nullable(Type.String()),
  owner_attempt: Nullable(Type.Integer()),
});

export const NodeSchema = Type.Object({
  id: Type.String(),
  hostname: Type.String(),
  labels: StringMap,
  status: Type.Union([Type.Literal('ONLINE'), Type.Literal('OFFLINE')]),
  last_seen_at: Type.String({ format: 'date-time' }),
  gpus: Type.Array(SlotSchema),
});
