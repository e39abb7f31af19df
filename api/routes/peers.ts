/**
 * POST /nodes/:id/peers (issue 46, docs/outage-rule.md "Peer witnesses"): an agent's peer report,
 * once a second with its node token. It records that the control plane heard the node, and what
 * the node heard of the nodes it witnesses, and answers with the node's part of the peer channel:
 * its key, its witnesses (to heartbeat to) and its subjects (to watch, with their keys).
 *
 * A witness is believed only about the nodes assigned to it: anything else in its report is
 * named in `ignored` and not recorded, so no node can vote on a node it does not witness.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { peerMembers, peerSecretOf, recordPeerReport } from '../../db/queries/peers.ts';
import { getNode } from '../../db/queries/nodes.ts';
import { DEFAULT_WITNESS_SETTINGS, WITNESS_REPORT_INTERVAL_MS } from '../../domain/peer-witness.ts';
import { assignWitnesses } from '../../domain/witness-assignment.ts';
import { peerKey } from '../../runtime/peer-packet.ts';
import type { ApiDeps } from '../deps.ts';
import { notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { PeerAssignment, PeerReportBody } from '../schemas/peers.ts';

export const peerRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  let secret: string | null = null;
  // The members, read at most once a second: every node reports every second, and each report
  // reading every node would cost n² rows a second.
  let members: { at: number; list: Promise<Awaited<ReturnType<typeof peerMembers>>> } | null = null;
  const membersNow = () => {
    if (!members || Date.now() - members.at >= WITNESS_REPORT_INTERVAL_MS) members = { at: Date.now(), list: peerMembers(db) };
    return members.list;
  };
  app.post(
    '/nodes/:id/peers',
    { schema: { tags: ['nodes'], summary: "A node's peer report (its node token): what it heard of the nodes it witnesses; answers with its witnesses and subjects", params: IdParams, body: PeerReportBody, response: { 200: PeerAssignment, ...NotFound } } },
    async (req) => {
      const nodeId = req.params.id;
      if (!(await getNode(db, nodeId))) throw notFound('node', nodeId);
      secret ??= await peerSecretOf(db);
      const before = await membersNow().catch((err: unknown) => {
        members = null;
        throw err;
      });
      const ids = before.some((m) => m.id === nodeId) ? before.map((m) => m.id) : [...before.map((m) => m.id), nodeId];
      const assigned = assignWitnesses(ids, DEFAULT_WITNESS_SETTINGS.k);
      const subjects = ids.filter((s) => assigned.get(s)?.includes(nodeId));
      const heard = req.body.heard.filter((h) => subjects.includes(h.node));
      await recordPeerReport(db, { nodeId, peerAddr: req.body.peer_addr, heard: heard.map((h) => ({ subject: h.node, agoMs: h.ago_ms })), ignored: req.body.ignored_packets, agentAlive: req.body.agent_alive });
      const addr = new Map(before.map((m) => [m.id, m.peerAddr]));
      return {
        interval_ms: WITNESS_REPORT_INTERVAL_MS,
        key: peerKey(secret, nodeId),
        witnesses: (assigned.get(nodeId) ?? []).map((w) => ({ node: w, peer_addr: addr.get(w) ?? null })),
        subjects: subjects.map((s) => ({ node: s, key: peerKey(secret!, s) })),
        ignored: req.body.heard.filter((h) => !subjects.includes(h.node)).map((h) => h.node),
      };
    },
  );
};
