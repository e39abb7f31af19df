import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { queuedJobs } from '../../db/queries/queued-jobs.ts';
import { clearQuota, quotaLines, setQuota, type QuotaLine } from '../../db/queries/quotas.ts';
import { DEFAULT_FAIRSHARE_HALF_LIFE_H } from '../../domain/fair-share.ts';
import { mayRead } from '../auth/auth.ts';
import { notFound } from '../errors.ts';
import { NotFound } from '../schemas/common.ts';
import { ProjectParams } from '../schemas/projects.ts';
import { QuotaBody, QuotaLineSchema, QuotaListSchema, QuotaQuery } from '../schemas/quotas.ts';
import { wakeScheduler } from '../../temporal/scheduler-ops.ts';
import type { ApiDeps } from '../deps.ts';

const lineJson = (l: QuotaLine) => ({
  project: l.project,
  pool: l.pool,
  gpus: l.gpus,
  in_use: l.inUse,
  borrowed: l.borrowed,
  queued_jobs: l.queuedJobs,
  queued_cards: l.queuedCards,
  usage_card_hours: l.usageCardHours,
  fair_share: l.fairShareFactor,
});

/** Project quotas and the fair-share order they feed (domain/fair-share.ts): admins set them, anyone lists the projects it may read. */
export const quotaRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, client, fairShareHalfLifeMs }) => {
  const halfLifeMs = fairShareHalfLifeMs ?? DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000;
  const lines = async () => {
    const now = new Date();
    return quotaLines(db, await queuedJobs(db, now), now, halfLifeMs);
  };

  app.get(
    '/quotas',
    { schema: { tags: ['quotas'], summary: "Each project's quota (whole cluster or per pool), cards in use and borrowed, queued work, recent usage and fair-share factor; a project with no quota is listed while it holds or wants cards. Only the projects the caller may read", response: { 200: QuotaListSchema } } },
    async (req) => ({ half_life_h: halfLifeMs / 3_600_000, quotas: (await lines()).filter((l) => mayRead(req, l.project)).map(lineJson) }),
  );

  app.put(
    '/projects/:project/quota',
    {
      schema: {
        tags: ['quotas'],
        summary: "Set a project's guaranteed cards, over the whole cluster or in a pool (admins; the project is created on first use). Its jobs within the quota are served before those of projects over theirs; idle cards are lent beyond it",
        params: ProjectParams,
        body: QuotaBody,
        response: { 200: QuotaLineSchema },
      },
    },
    async (req) => {
      const by = req.principal?.kind === 'admin' ? req.principal.name : 'an admin';
      const pool = req.body.pool ?? null;
      const projectId = await db.transaction((tx) => setQuota(tx, req.params.project, pool, req.body.gpus, by));
      // The order changed: a pass soon. Temporal not answering loses nothing: the next pass uses it.
      await wakeScheduler(client).catch((err: unknown) => req.log.warn({ err }, 'quota: the scheduler was not woken'));
      // By id: a name the driver reads back otherwise (a leading U+FEFF) is still this project's line.
      return lineJson((await lines()).find((l) => l.projectId === projectId && l.pool === pool && l.gpus !== null)!);
    },
  );

  app.delete(
    '/projects/:project/quota',
    { schema: { tags: ['quotas'], summary: "Clear a project's quota over the whole cluster, or in the pool of ?pool= (admins): its jobs have a guarantee of 0 there again", params: ProjectParams, querystring: QuotaQuery, response: { 204: Type.Null(), ...NotFound } } },
    async (req, reply) => {
      const pool = req.query.pool ?? null;
      if (!(await db.transaction((tx) => clearQuota(tx, req.params.project, pool)))) throw notFound('quota of project', pool ? `${req.params.project} in pool ${pool}` : req.params.project);
      await wakeScheduler(client).catch((err: unknown) => req.log.warn({ err }, 'quota: the scheduler was not woken'));
      return reply.status(204).send(null);
    },
  );
};
