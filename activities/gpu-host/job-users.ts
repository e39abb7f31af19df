/**
 * Which Unix user an attempt runs as (`gpuctl agent --job-users`, GPUPLANE_JOB_USERS).
 *
 * - An agent running as root runs every job under an unprivileged uid of its own, one per
 *   project, taken from a pool: by default the uids DEFAULT_JOB_UIDS (no names needed: they own
 *   nothing else on a machine), or a range `A-B`, or a list of existing users `alice,bob`. A
 *   project keeps its uid on this node (recorded in the agent's data dir), so its jobs share
 *   their files (a checkpoint to resume from) and no other project's job can read them.
 * - `agent` (and any agent that is not root) runs jobs as the agent's own user: they can read
 *   what the agent can (its token, other jobs' files), so the node is single-tenant.
 */
import { execFileSync } from 'node:child_process';
import { lookupUser } from '../../runtime/users.ts';
import fs from 'node:fs';
import path from 'node:path';
import { writePrivateFile } from '../../runtime/private-files.ts';
import { DEFAULT_JOB_UIDS, describePool, parseJobUsers as parseSpec, placeIdentity, uidRangesOf, type JobIdentity, type JobUser, type JobUsersSpec } from '../../domain/job-identity.ts';
import { claimUids, rangesText, UID_CLAIMS_DIR, type UidClaim, type UidRange } from './uid-claim.ts';

export { DEFAULT_JOB_UIDS };

/** How many blocks of 1000 uids from DEFAULT_JOB_UIDS on `gpuctl up` looks through for one no other agent claims. */
const FREE_BLOCKS = 1000;

export type { JobUser, JobUsersSpec };

/** Parses `--job-users` (domain/job-identity.ts), names looked up in this machine's user database. Throws a one-line error. */
export function parseJobUsers(raw: string, lookup: (name: string) => JobUser | null = lookupUser): JobUsersSpec {
  return parseSpec(raw, lookup);
}

/** The blocks of 1000 uids `gpuctl up` may take, from DEFAULT_JOB_UIDS on; the one this data dir's projects have uids in first. */
function defaultBlocks(dataDir: string): UidRange[][] {
  const base = Number(DEFAULT_JOB_UIDS.split('-')[0]);
  const ks = Array.from({ length: FREE_BLOCKS }, (_, k) => k);
  let saved: number | undefined;
  try {
    saved = Object.values(JSON.parse(fs.readFileSync(path.join(dataDir, 'job-users.json'), 'utf8')) as Record<string, unknown>).find((u): u is number => typeof u === 'number');
  } catch {
    // No projects yet.
  }
  const mine = saved === undefined ? -1 : Math.floor((saved - base) / 1000);
  if (mine > 0 && mine < FREE_BLOCKS) ks.unshift(...ks.splice(mine, 1));
  return ks.map((k) => [[base + k * 1000, base + k * 1000 + 999]]);
}

/**
 * The pool an agent runs jobs from, with each project's uid on this node. Null from `of` means
 * jobs run as the agent's own user.
 */
export class JobUsers {
  private readonly byProject: Record<string, number>;
  /** This machine's claim on the pool's uids (uid-claim.ts); null where none was made. */
  private claim: UidClaim | null = null;
  /** Why the pool is not claimed on this machine, where it could not be (claimed); null otherwise. */
  claimProblem: string | null = null;

  private constructor(
    private readonly pool: JobUser[],
    /** Where each project's uid is kept across agent restarts. */
    private readonly file: string,
  ) {
    let saved: unknown = {};
    try {
      saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch {
      // None yet (or unreadable): projects get uids afresh.
    }
    const uids = new Set(pool.map((u) => u.uid));
    this.byProject = {};
    if (saved && typeof saved === 'object') {
      for (const [p, u] of Object.entries(saved as Record<string, unknown>)) if (typeof u === 'number' && uids.has(u)) this.byProject[p] = u;
    }
  }

  /**
   * The agent's pool: `raw` (a flag or GPUPLANE_JOB_USERS) or, for an agent running as root, the
   * default range. Null: jobs run as the agent's own user (`agent`, or an agent that is not root).
   */
  static of(raw: string | undefined, dataDir: string, isRoot = process.getuid?.() === 0): JobUsers | null {
    const spec = parseJobUsers(raw?.trim() ? raw : isRoot ? DEFAULT_JOB_UIDS : 'agent');
    if (spec.kind === 'agent') return null;
    if (!isRoot) throw new Error('--job-users: only an agent running as root can run jobs as other users (run it as root, or use --job-users agent)');
    return new JobUsers(spec.users, path.join(dataDir, 'job-users.json'));
  }

  /**
   * The agent's pool, as `of`, claimed on this machine (uid-claim.ts): throws one line where
   * another live agent claims any of its uids. `pickFree` (`gpuctl up` without `--job-users`):
   * the first block of 1000 uids from DEFAULT_JOB_UIDS on that no agent claims, the one the data
   * dir's projects have their uids in first. A claims folder that cannot be written (a read-only
   * /run) leaves the pool unclaimed: `claimProblem` says why.
   */
  static claimed(raw: string | undefined, dataDir: string, o: { pickFree?: boolean; claimsDir?: string; isRoot?: boolean } = {}): JobUsers | null {
    const explicit = !!raw?.trim();
    const first = JobUsers.of(raw, dataDir, o.isRoot);
    if (!first) return null;
    const flag = '--job-users A-B (GPUPLANE_JOB_USERS)';
    const candidates = explicit || !o.pickFree ? [first.uidRanges()] : defaultBlocks(dataDir);
    try {
      const { claim, index } = claimUids(candidates, dataDir, flag, o.claimsDir ?? UID_CLAIMS_DIR);
      const users = rangesText(candidates[index]) === rangesText(first.uidRanges()) ? first : JobUsers.of(rangesText(candidates[index]), dataDir, true)!;
      users.claim = claim;
      return users;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS') throw err;
      first.claimProblem = `${o.claimsDir ?? UID_CLAIMS_DIR} is not writable (${code})`;
      return first;
    }
  }

  /** Gives the machine-wide claim up (the agent stops); a later claim of the same data dir takes it back anyway. */
  release(): void {
    this.claim?.release();
    this.claim = null;
  }

  /** The uid ranges of the pool, for rules that match every job's sockets (port-guard.ts). */
  uidRanges(): [number, number][] {
    return uidRangesOf(this.pool);
  }

  describe(): string {
    return describePool(this.pool);
  }

  /** The pool's users, in order. */
  users(): readonly JobUser[] {
    return this.pool;
  }

  /** The user a project's jobs run as on this node: its own, given on first use and kept. */
  forProject(project: string): JobUser {
    const known = this.byProject[project];
    const found = known === undefined ? undefined : this.pool.find((u) => u.uid === known);
    if (found) return found;
    const taken = new Set(Object.values(this.byProject));
    const free = this.pool.find((u) => !taken.has(u.uid));
    if (!free) throw new Error(`no job user left for project ${project}: all ${this.pool.length} of the pool (${this.describe()}) belong to other projects on this node; widen gpuctl agent --job-users`);
    this.byProject[project] = free.uid;
    writePrivateFile(this.file, JSON.stringify(this.byProject));
    return free;
  }
}

/** Refused: the node may not run the attempt's identity (a reason for the user, in one line). */
export class IdentityRefused extends Error {}

/**
 * The user an attempt (or a retention of its project's files) runs as on this node: the identity
 * the control plane sent (domain/job-identity.ts placeIdentity), or, from a control plane of
 * before identities, the project's uid of this node's own pool. Null: the agent's own user.
 * `differs` is called when the node's pool is not the plane's and it runs the project as another uid.
 * Throws IdentityRefused where the node may not use the identity.
 */
export function jobUserFor(users: JobUsers | null, a: { project?: string | null; runAs?: JobIdentity | null }, differs?: (why: string) => void): JobUser | null {
  if (!a.runAs) return users?.forProject(a.project ?? '') ?? null;
  const placed = placeIdentity(a.runAs, users?.users() ?? null, process.getuid?.() ?? -1, a.project ?? '(none)');
  if (!placed.ok) throw new IdentityRefused(placed.why);
  if (placed.differs && placed.user) differs?.(`this node's --job-users (${users!.describe()}) is not the control plane's GPUPLANE_JOB_USERS: project ${a.project} runs here as uid ${placed.user.uid}, on nodes with the plane's pool as uid ${a.runAs.uid}`);
  return placed.user;
}

/** Runs `cmd` as `user` (no groups, no privileges); true when it exits 0. */
function asUser(user: JobUser, cmd: string[]): boolean {
  try {
    execFileSync('setpriv', [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--no-new-privs', '--', ...cmd], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Why `user` cannot work in `dir` (enter it and list it), asked as that user; null when it can.
 * A missing dir is made by the job's user itself (0700), where that user may make it: a job may
 * be given a fresh folder of its own, and the agent's privilege makes no folder anywhere.
 */
export function workingDirProblemFor(dir: string, user: JobUser): string | null {
  if (!fs.existsSync(dir) && !asUser(user, ['mkdir', '-p', '-m', '700', '--', dir])) {
    return `working dir ${dir} does not exist and the job's user ${user.name} (uid ${user.uid}) may not make it; submit with a folder that user can make or use`;
  }
  if (asUser(user, ['test', '-d', dir, '-a', '-x', dir, '-a', '-r', dir])) return null;
  return `working dir ${dir} is not usable by the job's user ${user.name} (uid ${user.uid}; each project's jobs run as their own user, gpuctl agent --job-users): let that user enter and read it, or submit with a working dir that does not exist yet (the job's user makes it)`;
}
