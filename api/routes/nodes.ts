import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import type { GpuSlot } from '../../db/schema.ts';
import { projectsOfJobs } from '../../db/queries/auth.ts';
import { attemptsOnNode, drainNode, getNode, listNodesWithSlots, removeNode, resumeNode, type NodeWithSlots } from '../../db/queries/nodes.ts';
import { mayRead } from '../auth/auth.ts';
import { DomainError, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import { DrainBody, NodeSchema } from '../schemas/nodes.ts';
import { nodeJson } from '../serialize.ts';
import { sendPreemptions, wakeScheduler } from '../../temporal/scheduler-ops.ts';
import { markPreemptions, runningOnNode } from '../../db/queries/preempt.ts';
import { DEFAULT_PREEMPT_GRACE_S } from '../../domain/preemption.ts';
import type { ApiDeps } from '../deps.ts';
import { nodeWorkflowId } from '../../workflows/names.ts';
import { WorkflowNotFoundError } from '@temporalio/client';

/**
 * The nodes as the caller may see them: every card, but the owner (job and attempt) only of
 * cards held by a job it may read, so a token learns no job id of another project.
 */
async function visibleNodes(db: Db, req: FastifyRequest, ns: NodeWithSlots[]): Promise<(NodeWithSlots & { slots: (GpuSlot & { busy?: boolean })[] })[]> {
  if (!req.principal || req.principal.kind === 'admin') return ns;
  const owners = [...new Set(ns.flatMap((n) => n.slots.flatMap((s) => (s.ownerJobId ? [s.ownerJobId] : []))))];
  const projects = await projectsOfJobs(db, owners);
  const readable = (jobId: string) => projects.has(jobId) && mayRead(req, projects.get(jobId)!);
  return ns.map((n) => ({ ...n, slots: n.slots.map((s) => (s.ownerJobId && !readable(s.ownerJobId) ? { ...s, busy: true, ownerJobId: null, ownerAttempt: null } : s)) }));
}

export const nodeRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, client, preemptGraceS }) => {
  app.get(
    '/nodes',
    { schema: { tags: ['nodes'], summary: 'Nodes with their cards and who owns each (a card held by a job the caller may not read shows no owner)', response: { 200: Type.Object({ nodes: Type.Array(NodeSchema) }) } } },
    async (req) => ({ nodes: (await visibleNodes(db, req, await listNodesWithSlots(db))).map(nodeJson) }),
  );
  app.get(
    '/nodes/:id',
    { schema: { tags: ['nodes'], summary: 'One node (owners as in GET /nodes)', params: IdParams, response: { 200: NodeSchema, ...NotFound } } },
    async (req) => {
      if (!(await getNode(db, req.params.id))) throw notFound('node', req.params.id);
      const n = (await listNodesWithSlots(db)).find((x) => x.id === req.params.id);
      const [visible] = await visibleNodes(db, req, [n!]);
      return nodeJson(visible);
    },
  );
  // Admins only (api/auth/access-rules.ts), who see every owner: the answer is the node as GET /nodes/:id has it.
  const oneNode = async (id: string) => nodeJson((await listNodesWithSlots(db)).find((x) => x.id === id)!);
  app.post(
    '/nodes/:id/drain',
    {
      schema: {
        tags: ['nodes'],
        summary:
          'Drain a node (admins): the scheduler places nothing new on it; its running jobs run on and finish, or with preempt: true are preempted now and resume elsewhere. Kept in the database until resumed. Draining a drained node keeps when and by whom, and takes the new reason if one is given',
        params: IdParams,
        body: DrainBody,
        response: { 200: NodeSchema, ...NotFound },
      },
    },
    async (req) => {
      const by = req.principal?.kind === 'admin' ? req.principal.name : 'an admin';
      const reason = req.body?.reason ?? null;
      const orders = await db.transaction(async (tx) => {
        if (!(await drainNode(tx, req.params.id, { reason, by }))) return null;
        if (!req.body?.preempt) return [];
        // --preempt: every job running on it now is preempted, with its grace, and re-queued elsewhere.
        const why = `preempted: node ${req.params.id} drained by ${by}${reason ? ` (${reason})` : ''}`;
        const running = await runningOnNode(tx, req.params.id);
        return markPreemptions(tx, running.map((r) => ({ ...r, reason: why })), preemptGraceS ?? DEFAULT_PREEMPT_GRACE_S, new Date());
      });
      if (orders === null) throw notFound('node', req.params.id);
      // Temporal not answering loses nothing: the scheduler's passes send an unheard preemption again.
      if (orders.length) await sendPreemptions(client, orders);
      return oneNode(req.params.id);
    },
  );
  app.post(
    '/nodes/:id/resume',
    { schema: { tags: ['nodes'], summary: 'Resume a drained node (admins): the scheduler places on it again; a no-op on a node not drained', params: IdParams, response: { 200: NodeSchema, ...NotFound } } },
    async (req) => {
      const by = req.principal?.kind === 'admin' ? req.principal.name : 'an admin';
      const done = await db.transaction((tx) => resumeNode(tx, req.params.id, by));
      if (!done) throw notFound('node', req.params.id);
      // Its cards are free for the queue now: a pass soon, not at the scheduler's next idle pass.
      // Temporal not answering loses nothing: that idle pass places on it.
      await wakeScheduler(client).catch((err: unknown) => req.log.warn({ err }, 'resume: the scheduler was not woken'));
      return oneNode(req.params.id);
    },
  );
  app.delete(
    '/nodes/:id',
    {
      schema: {
        tags: ['nodes'],
        summary:
          'Remove a node that is gone for good (admins): its row and cards are deleted and its liveness workflow ended. Refused (409) while it is ONLINE (stop its agent first, or it registers again) or while an attempt runs on it or holds its cards (cancel or wait for them)',
        params: IdParams,
        response: { 200: Type.Object({ id: Type.String(), removed: Type.Literal(true) }), ...NotFound, ...Conflict },
      },
    },
    async (req) => {
      const id = req.params.id;
      const by = req.principal?.kind === 'admin' ? req.principal.name : 'an admin';
      const refusal = async (tx: Db) => {
        const n = await getNode(tx, id);
        if (!n) throw notFound('node', id);
        if (n.status === 'ONLINE') throw new DomainError('conflict', `node ${id} is ONLINE: stop its agent first (a live agent registers it again); it is OFFLINE once its lease lapses`);
        const held = await attemptsOnNode(tx, id);
        if (held.length) throw new DomainError('conflict', `node ${id} still holds ${held.length} attempt(s): ${held.map((h) => `${h.jobId}#${h.attempt}`).join(', ')}; cancel them, or wait until they end (a lost node's are LOST once its lease lapses)`);
      };
      await refusal(db);
      // The liveness workflow first: a node removed from the database while its workflow goes on would come back at its next lease.
      try {
        await client.workflow.getHandle(nodeWorkflowId(id)).terminate(`node ${id} removed by ${by}`);
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      await db.transaction(async (tx) => {
        await refusal(tx);
        await removeNode(tx, id, by);
      });
      return { id, removed: true as const };
    },
  );
};
