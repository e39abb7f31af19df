/**
 * Counts over all jobs and runs, for the console's tabs and indexes: counting the newest page of
 * GET /jobs or GET /runs would miss the rest. GET /jobs/counts (per state), GET /runs/counts
 * (per project and experiment).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { allows, visibleProjectIds } from '../auth/auth.ts';
import { forbidden } from '../errors.ts';
import { findProjectId } from '../../db/queries/projects.ts';
import { countJobsByState, type JobCountFilter } from '../../db/queries/job-counts.ts';
import { runCountsByExperiment } from '../../db/queries/runs.ts';
import { JOB_STATES } from '../../domain/job-states.ts';

import { JobCountsQuery, JobCountsSchema, RunCountsSchema, type JobCounts, type RunCounts } from '../schemas/job-counts.ts';
import type { ApiDeps } from '../deps.ts';

export const jobCountRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  // A static segment: find-my-way matches it before /jobs/:id whatever the order of registration.
  app.get(
    '/jobs/counts',
    {
      schema: {
        tags: ['jobs'],
        summary: 'How many jobs are in each state, optionally of one type or project',
        querystring: JobCountsQuery,
        response: { 200: JobCountsSchema },
      },
    },
    async (req): Promise<JobCounts> => {
      const states = Object.fromEntries(JOB_STATES.map((s) => [s, 0]));
      const filter: JobCountFilter = { type: req.query.type };
      const projectIds = await visibleProjectIds(db, req);
      if (projectIds) {
        if (req.query.project && req.principal && !allows(req.principal, req.query.project, false)) throw forbidden(`this token may not read project "${req.query.project}"`);
        if (projectIds.length === 0) return { total: 0, states };
        filter.projectIds = projectIds;
      }
      if (req.query.project) {
        const projectId = await findProjectId(db, req.query.project);
        if (!projectId) return { total: 0, states };
        filter.projectId = projectId;
      }
      const rows = await countJobsByState(db, filter);
      for (const r of rows) states[r.state] = r.n;
      return { total: rows.reduce((t, r) => t + r.n, 0), states };
    },
  );

  app.get(
    '/runs/counts',
    { schema: { tags: ['runs'], summary: 'How many runs (and running ones) each project/experiment has, latest run first', response: { 200: RunCountsSchema } } },
    async (req): Promise<RunCounts> => {
      const rows = await runCountsByExperiment(db, await visibleProjectIds(db, req));
      return { experiments: rows.map((r) => ({ ...r, latest: (r.latest ?? new Date(0)).toISOString() })) };
    },
  );
};
