/**
 * Projects and the one identity each runs as on every node (domain/job-identity.ts):
 * `gpuctl projects`, `gpuctl project set-user PROJECT --user NAME | --uid N [--group NAME | --gid N] | --clear`.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { poolOwnerOfUid, projectIdentities, setProjectUser } from '../../db/queries/project-identity.ts';
import type { JobIdentity, JobUser } from '../../domain/job-identity.ts';
import { lookupGroup, lookupUser, userNameOf } from '../../runtime/users.ts';
import { mayRead } from '../auth/auth.ts';
import { DomainError } from '../errors.ts';
import { Conflict } from '../schemas/common.ts';
import { ProjectIdentitySchema, ProjectListSchema, SetUserBody, type ProjectIdentityJson, type SetUserBodyJson } from '../schemas/project-users.ts';
import { ProjectParams } from '../schemas/projects.ts';
import type { ApiDeps } from '../deps.ts';

const identityJson = (i: JobIdentity | null) => (i ? { uid: i.uid, gid: i.gid, user: i.name, source: i.source } : null);

/** The user a set-user body names, looked up on this machine; a 400 where a name is unknown. */
function userOf(b: SetUserBodyJson): JobUser {
  let u: JobUser;
  if (b.user !== undefined) {
    const found = lookupUser(b.user);
    if (!found) throw new DomainError('invalid', `user: no user named "${b.user}" on the control plane's machine (getent passwd); create it, or give --uid`);
    if (found.uid === 0) throw new DomainError('invalid', `user: "${b.user}" is root; jobs must run unprivileged`);
    u = found;
  } else {
    u = { uid: b.uid!, gid: b.uid!, name: userNameOf(b.uid!) ?? `gpuplane-${b.uid}` };
  }
  if (b.group !== undefined) {
    const gid = lookupGroup(b.group);
    if (gid === null) throw new DomainError('invalid', `group: no group named "${b.group}" on the control plane's machine (getent group)`);
    if (gid === 0) throw new DomainError('invalid', `group: "${b.group}" is root's group; jobs must run unprivileged`);
    u = { ...u, gid };
  } else if (b.gid !== undefined) u = { ...u, gid: b.gid };
  if (u.gid === 0) throw new DomainError('invalid', `the user's primary group is root's (gid 0); give --group or --gid`);
  return u;
}

export const projectUserRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  app.get(
    '/projects',
    { schema: { tags: ['projects'], summary: 'The projects the caller may read, each with the Unix user its jobs run as on every node (null: none given yet)', response: { 200: ProjectListSchema } } },
    async (req) => {
      const all = await projectIdentities(db, null);
      return { projects: all.filter((p) => mayRead(req, p.name)).map((p) => ({ project: p.name, identity: identityJson(p.identity) })) };
    },
  );

  app.put(
    '/projects/:project/job-user',
    {
      schema: {
        tags: ['projects'],
        summary: "Run a project's jobs as an existing Unix user on every node (admins; the project is created on first use)",
        description:
          "Files the jobs write on shared storage then belong to the team's own account. Each node runs it only where its --job-users allows that uid: elsewhere the attempt fails at once, naming the project, the uid and the flag. A uid another project has from the pool is refused (409): the two would share files.",
        params: ProjectParams,
        body: SetUserBody,
        response: { 200: ProjectIdentitySchema, ...Conflict },
      },
    },
    async (req): Promise<ProjectIdentityJson> => {
      const u = userOf(req.body);
      const identity = await db.transaction(async (tx) => {
        const owner = await poolOwnerOfUid(tx, req.params.project, u.uid);
        if (owner) throw new DomainError('conflict', `uid ${u.uid} is project ${owner}'s (given from the pool): two projects on one uid would read each other's files`);
        return setProjectUser(tx, req.params.project, u);
      });
      return { project: req.params.project, identity: identityJson(identity) };
    },
  );

  app.delete(
    '/projects/:project/job-user',
    {
      schema: {
        tags: ['projects'],
        summary: "Clear a project's identity (admins): its next attempt gets a uid of the control plane's pool again",
        params: ProjectParams,
        response: { 200: ProjectIdentitySchema },
      },
    },
    async (req): Promise<ProjectIdentityJson> => {
      await db.transaction((tx) => setProjectUser(tx, req.params.project, null));
      return { project: req.params.project, identity: null };
    },
  );
};
