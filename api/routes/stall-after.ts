/** A project's stall-after (domain/stall.ts): `gpuctl stall-after PROJECT [--set 1h | --clear]`. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { projectStallAfter, setProjectStallAfter } from '../../db/queries/projects.ts';
import { DEFAULT_STALL_AFTER_S, stallAfterLevel } from '../../domain/stall.ts';
import type { ApiDeps } from '../deps.ts';
import { ProjectParams, StallAfterBody, StallAfterSchema } from '../schemas/projects.ts';

export const stallAfterRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, stallAfterS }) => {
  const planeDefault = stallAfterS ?? DEFAULT_STALL_AFTER_S;
  const answer = async (project: string) => {
    const r = stallAfterLevel(await projectStallAfter(db, project), planeDefault);
    return { project, stall_after_s: r.stallAfterS, level: r.level };
  };
  const reply200 = { 200: StallAfterSchema };
  app.get(
    '/projects/:project/stall-after',
    { schema: { tags: ['projects'], summary: "The stall-after in force for a project's TRAIN and EVALUATE jobs, and where it comes from", params: ProjectParams, response: reply200 } },
    async (req) => answer(req.params.project),
  );
  app.put(
    '/projects/:project/stall-after',
    { schema: { tags: ['projects'], summary: "Set a project's stall-after (the project is created on first use); a job's own --stall-after overrides it", params: ProjectParams, body: StallAfterBody, response: reply200 } },
    async (req) => {
      await db.transaction((tx) => setProjectStallAfter(tx, req.params.project, req.body.stall_after_s));
      return answer(req.params.project);
    },
  );
  app.delete(
    '/projects/:project/stall-after',
    { schema: { tags: ['projects'], summary: "Clear a project's stall-after (the plane's GPUPLANE_STALL_AFTER_S applies again)", params: ProjectParams, response: reply200 } },
    async (req) => {
      await db.transaction((tx) => setProjectStallAfter(tx, req.params.project, null));
      return answer(req.params.project);
    },
  );
};
