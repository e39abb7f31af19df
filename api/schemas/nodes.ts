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
  drained: Nullable(
    Type.Object({
      at: Type.String({ format: 'date-time', description: 'when it was first drained' }),
      reason: Nullable(Type.String()),
      by: Type.String({ description: 'the name of the admin token that drained it' }),
    }, { description: 'set while the node is drained (gpuctl node drain): the scheduler places nothing new on it, its running jobs finish; null when it takes jobs' }),
  ),
  gpus: Type.Array(SlotSchema),
});

export const DrainBody = Type.Optional(
  Type.Object(
    {
      reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'why; shown by gpuctl nodes and the console. Draining a drained node again keeps when and by whom, and takes this reason' })),
      preempt: Type.Optional(Type.Boolean({ description: 'true: preempt the jobs running on it now (each with its grace); they are re-queued and resume elsewhere from their latest checkpoint' })),
    },
    { additionalProperties: false },
  ),
);
