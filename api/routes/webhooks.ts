/** Webhooks (docs/webhooks.md): admins, or members for their projects. Deliveries are the control worker's (workflows/webhook-workflow.ts). */
import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { ensureProject } from '../../db/queries/projects.ts';
import { deleteWebhook, getWebhook, insertWebhook, listWebhooks, webhookBacklog, type WebhookRow } from '../../db/queries/webhooks.ts';
import { newId } from '../../db/ids.ts';
import { bodyOf, pingPayload } from '../../domain/webhooks.ts';
import { checkWebhookTarget, postWebhook, WebhookTargetError } from '../../runtime/webhook-send.ts';
import { startWebhookWorkflow, stopWebhookWorkflow } from '../../temporal/webhook-ops.ts';
import { allows } from '../auth/auth.ts';
import type { ApiDeps } from '../deps.ts';
import { DomainError, notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { CreatedWebhookSchema, CreateWebhookBody, WebhookListSchema, WebhookTestSchema } from '../schemas/webhooks.ts';

const webhookJson = (w: WebhookRow, backlog: number) => ({
  id: w.id,
  url: w.url,
  events: w.events,
  project: w.project,
  format: w.format,
  created_by: w.createdBy,
  created_at: w.createdAt.toISOString(),
  cursor: w.cursor,
  backlog,
  last_success_at: w.lastSuccessAt?.toISOString() ?? null,
  last_failure_at: w.lastFailureAt?.toISOString() ?? null,
  last_error: w.lastError,
});

/** Whether the caller may manage a webhook of this project (null: of every project); an app built without auth may. */
const mayManage = (req: FastifyRequest, project: string | null) => !req.principal || allows(req.principal, project, true);

export const webhookRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, client, webhookAllowPrivate }) => {
  const policy = webhookAllowPrivate ?? 'none';
  const checked = async (url: string) => {
    try {
      return await checkWebhookTarget(url, policy);
    } catch (err) {
      if (err instanceof WebhookTargetError) throw new DomainError('invalid', err.message);
      throw err;
    }
  };

  app.post(
    '/webhooks',
    {
      schema: {
        tags: ['webhooks'],
        summary: "Add a webhook: the events it names are POSTed to its URL, signed, in order, each retried with back-off for up to 24 h (admins, or members for their projects). The URL's host must resolve to public addresses unless GPUPLANE_WEBHOOK_ALLOW_PRIVATE says otherwise",
        body: CreateWebhookBody,
        response: { 201: CreatedWebhookSchema },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const url = (await checked(b.url)).toString();
      const secret = b.secret ?? randomBytes(32).toString('hex');
      const p = req.principal;
      const by = p && 'name' in p ? p.name : 'anonymous';
      const id = newId('whk');
      await db.transaction(async (tx) => {
        const projectId = b.project ? await ensureProject(tx, b.project) : null;
        await insertWebhook(tx, { id, url, events: b.events, projectId, secret, format: b.format ?? 'json', createdBy: by });
      });
      // Temporal away: the control worker's reconciler starts it; the events wait behind the cursor meanwhile.
      await startWebhookWorkflow(client, id).catch((err: unknown) => req.log.warn({ err, webhookId: id }, 'webhook: its workflow was not started; the control worker will'));
      const w = (await getWebhook(db, id))!;
      return reply.status(201).send({ ...webhookJson(w, 0), ...(b.secret ? {} : { secret }) });
    },
  );

  app.get(
    '/webhooks',
    { schema: { tags: ['webhooks'], summary: 'Webhooks the caller may manage, with their last success, last failure and backlog (never their secrets)', response: { 200: WebhookListSchema } } },
    async (req) => {
      const rows = (await listWebhooks(db, null)).filter((w) => mayManage(req, w.project));
      return { webhooks: await Promise.all(rows.map(async (w) => webhookJson(w, await webhookBacklog(db, w)))) };
    },
  );

  app.delete(
    '/webhooks/:id',
    { schema: { tags: ['webhooks'], summary: 'Remove a webhook: nothing more is delivered to it', params: IdParams, response: { 204: Type.Null(), ...NotFound } } },
    async (req, reply) => {
      if (!(await deleteWebhook(db, req.params.id))) throw notFound('webhook', req.params.id);
      await stopWebhookWorkflow(client, req.params.id).catch((err: unknown) => req.log.warn({ err }, 'webhook: its workflow ends at its next step instead'));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/webhooks/:id/test',
    { schema: { tags: ['webhooks'], summary: "POST a signed ping (X-GPUPlane-Event: ping) to a webhook's URL now and answer how the receiver took it; its cursor and backlog do not change", params: IdParams, response: { 200: WebhookTestSchema, ...NotFound } } },
    async (req) => {
      const w = await getWebhook(db, req.params.id);
      if (!w) throw notFound('webhook', req.params.id);
      const delivery = `${w.id}.ping-${randomUUID()}`;
      const started = performance.now();
      const body = bodyOf(w.format, pingPayload(w.id, delivery, new Date()));
      try {
        const a = await postWebhook({ url: w.url, event: 'ping', deliveryId: delivery, body, secret: w.secret, policy, timeoutMs: 10_000 });
        const ok = a.status >= 200 && a.status <= 299;
        return { delivered: ok, status: a.status, error: ok ? null : `HTTP ${a.status}${a.body ? `: ${a.body.slice(0, 200)}` : ''}`, delivery, ms: performance.now() - started };
      } catch (err) {
        return { delivered: false, status: null, error: (err as Error).message, delivery, ms: performance.now() - started };
      }
    },
  );
};
