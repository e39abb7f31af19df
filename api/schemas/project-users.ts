/** Projects' job identities (api/routes/project-users.ts; domain/job-identity.ts). */
import { Type, type Static } from '@sinclair/typebox';
import { MAX_UID, USER_NAME } from '../../domain/job-identity.ts';
import { Nullable } from './common.ts';
import { exactlyOne, notBoth } from './rules.ts';

const Name = (what: string) => Type.String({ minLength: 1, maxLength: 33, pattern: USER_NAME.source, description: `an existing ${what}'s name on the control plane's machine (getent)` });
const Id = (what: string) => Type.Integer({ minimum: 1, maximum: MAX_UID, description: `a ${what} id (not 0: jobs never run as root)` });

export const SetUserBody = Type.Object(
  {
    user: Type.Optional(Name('user')),
    uid: Type.Optional(Id('user')),
    group: Type.Optional(Name('group')),
    gid: Type.Optional(Id('group')),
  },
  {
    additionalProperties: false,
    allOf: [exactlyOne(['user', 'uid'], 'give exactly one of user (an existing user\'s name) and uid'), notBoth('group', 'gid', 'give group (a name) or gid, not both')],
    description: "the existing Unix user the project's jobs run as on every node: user or uid (one of them), and optionally its group (group or gid; default: the user's primary group, or gid = uid for a bare uid)",
  },
);
export type SetUserBodyJson = Static<typeof SetUserBody>;

export const IdentitySchema = Type.Object(
  {
    uid: Type.Integer(),
    gid: Type.Integer(),
    user: Type.String({ description: 'its name, or gpuplane-<uid> for a uid of the pool without one' }),
    source: Type.Union([Type.Literal('pool'), Type.Literal('admin')], { description: "pool: given once from the control plane's GPUPLANE_JOB_USERS; admin: set with gpuctl project set-user" }),
  },
  { description: "the Unix user the project's jobs run as on every node" },
);

export const ProjectIdentitySchema = Type.Object({
  project: Type.String(),
  identity: Nullable(IdentitySchema),
});
export type ProjectIdentityJson = Static<typeof ProjectIdentitySchema>;

export const ProjectListSchema = Type.Object({ projects: Type.Array(ProjectIdentitySchema) });
export type ProjectListJson = Static<typeof ProjectListSchema>;
