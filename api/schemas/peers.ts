import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';

const NODE_ID = { minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' } as const;

/**
 * An agent's peer report (issue 46), once a second with its node token: where it takes peer
 * heartbeats, and for each node it witnesses how long ago it last heard it. Its arrival is also
 * the control plane's own hearing of the node.
 */
export const PeerReportBody = Type.Object(
  {
    peer_addr: Nullable(Type.String({ minLength: 3, maxLength: 300, pattern: '^[^\\s]+:[0-9]{1,5}$', description: 'host:port where the agent takes heartbeats (UDP); null: it has no peer socket' })),
    heard: Type.Array(
      Type.Object(
        {
          node: Type.String({ ...NODE_ID, description: 'a node this agent witnesses' }),
          ago_ms: Type.Integer({ minimum: 0, maximum: 86_400_000, description: 'ms since it last heard that node (never heard: since it began to watch it)' }),
        },
        { additionalProperties: false },
      ),
      { maxItems: 64 },
    ),
    agent_alive: Type.Optional(Type.Boolean({ description: "false: the node's agent is gone (restarting) and its peer keeper speaks for the node while its attempts run; stored, and shown on GET /nodes as peer.agent_alive (absent: stored as null, not said)" })),
    ignored_packets: Type.Optional(
      Type.Record(Type.String({ pattern: '^[a-z-]{1,32}$' }), Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { maxProperties: 16, description: 'peer datagrams the agent ignored since it started, by why (malformed, not-for-me, unknown-sender, bad-mac, replayed)' }),
    ),
  },
  { additionalProperties: false },
);
export type PeerReportBodyJson = Static<typeof PeerReportBody>;

/** What the agent needs to keep the peer channel: its key, whom to heartbeat, and whom it watches with their keys. */
export const PeerAssignment = Type.Object(
  {
    interval_ms: Type.Integer({ description: 'send heartbeats and reports this often' }),
    key: Type.String({ pattern: '^[0-9a-f]{64}$', description: "this node's key: it signs its heartbeats with it" }),
    witnesses: Type.Array(Type.Object({ node: Type.String(), peer_addr: Nullable(Type.String()) }, { additionalProperties: false }), { description: 'the nodes to heartbeat to' }),
    subjects: Type.Array(Type.Object({ node: Type.String(), key: Type.String({ pattern: '^[0-9a-f]{64}$' }) }, { additionalProperties: false }), { description: "the nodes this one witnesses, with the keys their heartbeats are signed with" }),
    ignored: Type.Array(Type.String(), { description: 'nodes in `heard` that this node does not witness: not recorded' }),
  },
  { additionalProperties: false },
);
export type PeerAssignmentJson = Static<typeof PeerAssignment>;
