/**
 * One identity per project on every node (issue 43): the Unix user a project's jobs run as. The
 * control plane gives each project a uid of its pool once (GPUPLANE_JOB_USERS, the same words as
 * an agent's `--job-users`), or an admin maps the project to an existing user
 * (`gpuctl project set-user`); each attempt carries it to its node. A node runs it only as a uid
 * its own `--job-users` allows. No I/O here: user names are looked up by the caller's `lookup`.
 */

export interface JobUser {
  uid: number;
  gid: number;
  /** The user's name, or `gpuplane-<uid>` for a bare uid. */
  name: string;
}

/** Where a project's identity came from: the control plane's pool, or an admin's mapping. */
export type IdentitySource = 'pool' | 'admin';

/** What an attempt carries: the project's identity, with its place in the plane's pool (pool identities only). */
export interface JobIdentity extends JobUser {
  source: IdentitySource;
  /** Its position in the control plane's pool (0 for the pool's first uid); null for an admin's mapping. */
  slot: number | null;
  /** The project's name, for words (an attempt names its project by id). */
  project?: string;
}

/** What `--job-users` / GPUPLANE_JOB_USERS says: the agent's own user, or a pool of users. */
export type JobUsersSpec = { kind: 'agent' } | { kind: 'pool'; users: JobUser[] };

/** The default pool of job uids (an agent running as root, and the control plane): numbers no account owns on a usual machine. */
export const DEFAULT_JOB_UIDS = '3000000-3000999';

export const MAX_POOL = 65_536;
/** The lowest uid a pool range or a mapping may name: below it are the system's own accounts. */
export const MIN_JOB_UID = 1000;
export const MAX_UID = 4_294_967_294;
export const USER_NAME = /^[a-z_][a-z0-9_.-]{0,31}\$?$/i;

/**
 * Parses `--job-users`: `agent`, or a comma-separated list of uid ranges `A-B` and existing user
 * names (`3000000-3000999,alice`). Throws a one-line error.
 */
export function parseJobUsers(raw: string, lookup: (name: string) => JobUser | null): JobUsersSpec {
  const s = raw.trim();
  if (s === 'agent') return { kind: 'agent' };
  const users: JobUser[] = [];
  const seen = new Set<number>();
  const add = (u: JobUser) => {
    if (!seen.has(u.uid)) users.push(u);
    seen.add(u.uid);
  };
  for (const part of s.split(',').map((p) => p.trim())) {
    const range = /^(\d+)-(\d+)$/.exec(part);
    if (range) {
      const lo = Number(range[1]);
      const hi = Number(range[2]);
      if (lo < MIN_JOB_UID || hi < lo || hi > MAX_UID || hi - lo + 1 > MAX_POOL) throw new Error(`--job-users ${part}: a range of uids A-B with ${MIN_JOB_UID} <= A <= B and at most ${MAX_POOL} uids`);
      for (let u = lo; u <= hi; u++) add({ uid: u, gid: u, name: `gpuplane-${u}` });
      continue;
    }
    if (!USER_NAME.test(part)) throw new Error(`--job-users: expected "agent", or uid ranges A-B and user names separated by commas, got "${raw}"`);
    const u = lookup(part);
    if (!u) throw new Error(`--job-users: no user named "${part}" on this machine`);
    if (u.uid === 0) throw new Error(`--job-users: "${part}" is root; jobs must run unprivileged`);
    add(u);
  }
  if (users.length > MAX_POOL) throw new Error(`--job-users: at most ${MAX_POOL} users in all`);
  return { kind: 'pool', users };
}

/** The uid ranges of a list of users, in order: what a pool is shown as and guarded by. */
export function uidRangesOf(users: readonly JobUser[]): [number, number][] {
  const sorted = users.map((u) => u.uid).sort((a, b) => a - b);
  const out: [number, number][] = [];
  for (const u of sorted) {
    const last = out[out.length - 1];
    if (last && u === last[1] + 1) last[1] = u;
    else out.push([u, u]);
  }
  return out;
}

/** A pool in words: `uids A-B`, or its users' names. */
export function describePool(users: readonly JobUser[]): string {
  const r = uidRangesOf(users);
  return r.length === 1 && r[0][0] !== r[0][1] ? `uids ${r[0][0]}-${r[0][1]}` : users.map((u) => u.name).join(', ');
}

/** An identity in words: `uid 3000004 (pool)`, `alice (uid 1001, gid 1001; set by an admin)`. */
export function describeIdentity(i: JobIdentity): string {
  if (i.source === 'pool') return `uid ${i.uid} (the plane's pool)`;
  return bareName(i) ? `uid ${i.uid} (gid ${i.gid}; set by an admin)` : `${i.name} (uid ${i.uid}, gid ${i.gid}; set by an admin)`;
}

/** A uid with no name of its own on the control plane's machine. */
const bareName = (i: JobUser) => i.name === `gpuplane-${i.uid}`;

/**
 * What a node runs an attempt as, given its own pool (null: the agent's own user, uid `self`):
 * - an admin's mapping: that uid, only where the pool holds it (or it is the agent's own uid on a
 *   node that runs jobs as itself); anything else is refused;
 * - a pool identity: its uid where the node's pool holds it, else the node's user at the same
 *   place in its own pool (`differs`: the node's --job-users is not the plane's, so this node
 *   runs the project as another uid than the others), else refused;
 * - a node that runs jobs as the agent's own user runs a pool identity as itself.
 */
export type Placement = { ok: true; user: JobUser | null; differs: boolean } | { ok: false; why: string };

export function placeIdentity(id: JobIdentity, pool: readonly JobUser[] | null, self: number, projectRef: string): Placement {
  const project = id.project ?? projectRef;
  const flag = 'gpuctl agent --job-users (GPUPLANE_JOB_USERS)';
  if (pool === null) {
    if (id.source === 'pool' || id.uid === self) return { ok: true, user: null, differs: false };
    return { ok: false, why: `project ${project} runs as ${describeIdentity(id)}, but this node runs every job as the agent's own user (uid ${self}): start the agent as root with ${flag} including uid ${id.uid}` };
  }
  const exact = pool.find((u) => u.uid === id.uid);
  if (exact) return { ok: true, user: { uid: id.uid, gid: id.gid, name: id.source === 'admin' ? id.name : exact.name }, differs: false };
  if (id.source === 'pool' && id.slot !== null && id.slot < pool.length) return { ok: true, user: pool[id.slot], differs: true };
  return {
    ok: false,
    why: `project ${project} runs as ${describeIdentity(id)}, which this node may not use: its ${flag} is ${describePool(pool)}; add ${id.source === 'admin' && !bareName(id) ? `${id.name} or ` : ''}uid ${id.uid} to it, or map the project to a user it allows (gpuctl project set-user)`,
  };
}
