/**
 * Each project's job identity (domain/job-identity.ts): given once from the control plane's pool
 * on the project's first attempt, or set by an admin (`gpuctl project set-user`), and read with
 * every attempt and retention so all nodes run the project as one uid.
 */
import { and, asc, eq, inArray, isNotNull, sql } from 'drizzle-orm';
import type { JobIdentity, JobUser } from '../../domain/job-identity.ts';
import type { Executor } from '../client.ts';
import { projects, type Project } from '../schema.ts';
import { ensureProject, findProjectId } from './projects.ts';

const identityOfRow = (p: Pick<Project, 'name' | 'jobUid' | 'jobGid' | 'jobUser' | 'jobUserSource' | 'jobUidSlot'>): JobIdentity | null =>
  p.jobUid === null || p.jobGid === null || !p.jobUserSource
    ? null
    : { uid: p.jobUid, gid: p.jobGid, name: p.jobUser ?? `gpuplane-${p.jobUid}`, source: p.jobUserSource, slot: p.jobUserSource === 'pool' ? p.jobUidSlot : null, project: p.name };

/** identityOf: a project's identity by id, null when it has none yet (or no such project). */
export async function identityOf(ex: Executor, projectId: string | null): Promise<JobIdentity | null> {
  if (!projectId) return null;
  const [p] = await ex.select().from(projects).where(eq(projects.id, projectId));
  return p ? identityOfRow(p) : null;
}

/**
 * identityFor: the project's identity, given now from `pool` where it has none: the pool's first
 * user no other project has (pool uids are one project's each). Null where there is no pool (the
 * control plane runs GPUPLANE_JOB_USERS=agent) or none is left: the node's own map decides then.
 * Pool assignments are serialised by an advisory lock of the transaction.
 */
export async function identityFor(tx: Executor, projectId: string | null, pool: readonly JobUser[] | null): Promise<JobIdentity | null> {
  if (!projectId) return null;
  const [p] = await tx.select().from(projects).where(eq(projects.id, projectId)).for('update');
  if (!p) return null;
  const known = identityOfRow(p);
  if (known || !pool?.length) return known;
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext('gpuplane.job-uids'))`);
  // Nor a uid an admin mapped a project to: that is the team's account, not a free one.
  const taken = new Set((await tx.select({ uid: projects.jobUid }).from(projects).where(isNotNull(projects.jobUid))).map((r) => r.uid));
  const slot = pool.findIndex((u) => !taken.has(u.uid));
  if (slot < 0) return null;
  const u = pool[slot];
  await tx.update(projects).set({ jobUid: u.uid, jobGid: u.gid, jobUser: u.name.startsWith('gpuplane-') ? null : u.name, jobUserSource: 'pool', jobUidSlot: slot }).where(eq(projects.id, projectId));
  return { ...u, source: 'pool', slot, project: p.name };
}

/**
 * setProjectUser maps a project (made on first use) to an existing user (source admin), or with
 * null clears its identity: its next attempt gets a uid of the pool again. Returns its identity.
 */
export async function setProjectUser(tx: Executor, project: string, user: JobUser | null): Promise<JobIdentity | null> {
  const id = user ? await ensureProject(tx, project) : await findProjectId(tx, project);
  if (!id) return null;
  await tx
    .update(projects)
    .set(user ? { jobUid: user.uid, jobGid: user.gid, jobUser: user.name, jobUserSource: 'admin', jobUidSlot: null } : { jobUid: null, jobGid: null, jobUser: null, jobUserSource: null, jobUidSlot: null })
    .where(eq(projects.id, id));
  return identityOf(tx, id);
}

/** projectIdentities: the projects (those of `ids`, or all) by name, each with its identity (null: none yet). */
export async function projectIdentities(ex: Executor, ids: readonly string[] | null): Promise<{ name: string; identity: JobIdentity | null }[]> {
  if (ids?.length === 0) return [];
  const rows = await ex
    .select()
    .from(projects)
    .where(ids ? inArray(projects.id, [...ids]) : undefined)
    .orderBy(asc(projects.name));
  return rows.map((p) => ({ name: p.name, identity: identityOfRow(p) }));
}

/** The other project that has this uid from the pool (a mapping to it would share that project's files), or undefined. */
export async function poolOwnerOfUid(ex: Executor, project: string, uid: number): Promise<string | undefined> {
  const [row] = await ex
    .select({ name: projects.name })
    .from(projects)
    .where(and(eq(projects.jobUserSource, 'pool'), eq(projects.jobUid, uid), sql`${projects.name} <> ${project}`));
  return row?.name;
}
