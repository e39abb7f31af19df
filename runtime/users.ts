/**
 * This machine's user database (getent: /etc/passwd, LDAP or sssd alike): the names of
 * `--job-users`, GPUPLANE_JOB_USERS and `gpuctl project set-user`.
 */
import { execFileSync } from 'node:child_process';
import type { JobUser } from '../domain/job-identity.ts';

function getent(db: 'passwd' | 'group', key: string): string[] | null {
  try {
    return execFileSync('getent', [db, key], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split(':');
  } catch {
    return null;
  }
}

/** A user's uid and primary gid by name, or null. */
export function lookupUser(name: string): JobUser | null {
  const f = getent('passwd', name);
  return f && f.length >= 4 ? { uid: Number(f[2]), gid: Number(f[3]), name: f[0] } : null;
}

/** A user's name by uid, or null where the uid has none. */
export function userNameOf(uid: number): string | null {
  const f = getent('passwd', String(uid));
  return f ? f[0] : null;
}

/** A group's gid by name, or null. */
export function lookupGroup(name: string): number | null {
  const f = getent('group', name);
  return f && f.length >= 3 ? Number(f[2]) : null;
}
