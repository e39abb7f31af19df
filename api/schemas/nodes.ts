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

const StringMapOfCounts = Type.Record(Type.String(), Type.Integer(), { description: 'peer datagrams its agent ignored since it started, by why' });

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
  peer: Type.Optional(
    Nullable(
      Type.Object(
        {
          verdict: Nullable(Type.Union([Type.Literal('fine'), Type.Literal('suspect'), Type.Literal('dead'), Type.Literal('outage')], { description: "the control plane's last verdict (docs/outage-rule.md, Peer witnesses): suspect and dead take no new attempt; null before the first" })),
          reason: Nullable(Type.String()),
          since: Nullable(Type.String({ format: 'date-time', description: 'when the verdict became this one' })),
          reported_at: Nullable(Type.String({ format: 'date-time', description: "when the node's last peer report arrived: the control plane's own hearing of it" })),
          addr: Nullable(Type.String({ description: 'host:port where its agent takes peer heartbeats (UDP)' })),
          witnesses: Type.Array(
            Type.Object({
              node: Type.String(),
              last_heard_at: Type.String({ format: 'date-time', description: 'when that witness last heard this node, by its latest report (never heard: when it began to watch it)' }),
              reported_at: Type.String({ format: 'date-time', description: 'when that report arrived' }),
            }),
            { description: "every node that reported on this one in the last minute: its witnesses" },
          ),
          ignored_packets: Nullable(StringMapOfCounts),
          agent_alive: Nullable(Type.Boolean({ description: "whether the node's agent lives, as its last peer report said: false while the agent is gone (restarting) and its peer keeper speaks for the node; null when the report did not say" })),
          agent_gone_since: Nullable(Type.String({ format: 'date-time', description: 'while agent_alive is false: the first report that said so; null otherwise' })),
        },
        { description: 'the peer channel (issue 46); null for a node whose agent never sent a peer report' },
      ),
    ),
  ),
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
