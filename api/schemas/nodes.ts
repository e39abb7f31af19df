import { Type } from '@sinclair/typebox';
import { Nullable, StringMap } from './common.ts';

export const SlotSchema = Type.Object({
  index: Type.Integer(),
  uuid: Type.String(),
  name: Type.String(),
  memory_mb: Type.Integer(),
  present: Type.Boolean(),
  busy: Type.Boolean({ description: 'held by a job, whether or not the caller may see which (owner_job_id is then null)' }),
  owner_job_id: Nullable(Type.String({ description: 'the job holding the card; null when free or held by a job the caller may not read' })),
  owner_attempt: Nullable(Type.Integer()),
});

export const NodeSchema = Type.Object({
  id: Type.String(),
  hostname: Type.String(),
  address: Nullable(Type.String({ description: "where the other members of a multi-node job reach it: `gpuctl agent --advertise-addr`, default the agent's address toward the control plane; null for an agent of before" })),
  labels: StringMap,
  status: Type.Union([Type.Literal('ONLINE'), Type.Literal('OFFLINE')]),
  last_seen_at: Type.String({ format: 'date-time' }),
  gpus: Type.Array(SlotSchema),
});
