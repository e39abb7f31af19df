/**
 * A machine-wide claim on an agent's job uids (issue 40). Two agents on one machine (two planes,
 * or a plane beside another cluster's agent) that gave projects uids from one pool would run two
 * planes' jobs as one uid: each could read the other's /proc/PID/environ (run token included) and
 * files, and each agent's sweep of a uid's leftovers (leftovers.ts) would kill the other's jobs.
 *
 * An agent running jobs as job users writes `<dir>/<lo>-<hi>.json` naming its uid ranges, its
 * data dir and its process (pid and start time), and refuses to start where a live claim of
 * another data dir overlaps its ranges. Node has no flock, so the claim is a file:
 * - a claim whose process is gone (no such pid, or a pid of another start time) is stale, and
 *   taken over: a crashed or detached agent holds nothing;
 * - a claim of the same data dir is the agent's own (a restart, `--on-stop detach`): taken back;
 * - the agents of one process (`gpuctl up --fake-nodes`) share one JobUsers, so one claim.
 * Reading the claims and writing one happen under `<dir>/.lock` (created O_EXCL, held for
 * milliseconds), so two agents starting at once cannot both take overlapping ranges.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** Where agents claim their job uids: one file per agent, on tmpfs, so a reboot leaves none. */
export const UID_CLAIMS_DIR = '/run/gpuplane/uids';

export type UidRange = [number, number];

/** What a claim file holds. */
export interface UidClaimRecord {
  ranges: UidRange[];
  dataDir: string;
  pid: number;
  /** The pid's start time (/proc/PID/stat, clock ticks since boot): a reused pid is not the holder. */
  startTime: string | null;
  /** This claim's own mark: an agent releases its file only while it is still its own. */
  nonce: string;
}

/** A held claim: release it when the agent stops (a stale one is taken over anyway). */
export class UidClaim {
  constructor(
    readonly file: string,
    readonly record: UidClaimRecord,
  ) {}

  release(): void {
    const now = readClaim(this.file);
    if (now?.nonce === this.record.nonce) fs.rmSync(this.file, { force: true });
  }
}

/** Why a claim could not be made: another live agent holds an overlapping range. */
export class UidClaimConflict extends Error {}

/** The start time of `pid` (field 22 of /proc/PID/stat), or null where there is no such process. */
export function processStartTime(pid: number, proc = '/proc'): string | null {
  try {
    const stat = fs.readFileSync(path.join(proc, String(pid), 'stat'), 'utf8');
    // After the command's closing parenthesis (the command may hold spaces): field 3 onwards.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Whether the process that wrote a claim (or the lock) still runs: same pid and start time. */
export function holderAlive(h: { pid: number; startTime: string | null }): boolean {
  try {
    process.kill(h.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const now = processStartTime(h.pid);
  return now === null || h.startTime === null || now === h.startTime;
}

function readClaim(file: string): UidClaimRecord | null {
  try {
    const r = JSON.parse(fs.readFileSync(file, 'utf8')) as UidClaimRecord;
    return Array.isArray(r.ranges) && typeof r.pid === 'number' && typeof r.dataDir === 'string' ? r : null;
  } catch {
    return null;
  }
}

const overlaps = (a: UidRange[], b: UidRange[]) => a.some(([lo, hi]) => b.some(([l, h]) => lo <= h && l <= hi));
export const rangesText = (r: UidRange[]) => r.map(([lo, hi]) => (lo === hi ? String(lo) : `${lo}-${hi}`)).join(',');

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Runs `fn` holding `<dir>/.lock`; a lock whose holder is gone, or older than 10 s, is broken. */
function withLock<T>(dir: string, fn: () => T): T {
  const lock = path.join(dir, '.lock');
  const me = JSON.stringify({ pid: process.pid, startTime: processStartTime(process.pid) });
  for (let tries = 0; ; tries++) {
    let fd: number;
    try {
      fd = fs.openSync(lock, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let stale = tries > 500;
      try {
        const h = JSON.parse(fs.readFileSync(lock, 'utf8')) as { pid: number; startTime: string | null };
        stale ||= !holderAlive(h) || Date.now() - fs.statSync(lock).mtimeMs > 10_000;
      } catch {
        // Being written or just removed: look again.
      }
      if (stale) fs.rmSync(lock, { force: true });
      else pause(20);
      continue;
    }
    try {
      fs.writeSync(fd, me);
      fs.closeSync(fd);
      return fn();
    } finally {
      fs.rmSync(lock, { force: true });
    }
  }
}

/**
 * claimUids claims the first of `candidates` (each a pool's uid ranges) that no live agent of
 * another data dir holds any uid of, for the agent of `dataDir`, and returns the claim and its
 * index in `candidates`. Throws UidClaimConflict (one line: the first candidate, who holds it,
 * and `flag`) where every candidate is taken; other errors (the folder cannot be written) as
 * they come.
 */
export function claimUids(candidates: UidRange[][], dataDir: string, flag: string, dir = UID_CLAIMS_DIR): { claim: UidClaim; index: number } {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const ownDir = path.resolve(dataDir);
  return withLock(dir, () => {
    const others: UidClaimRecord[] = [];
    for (const name of fs.readdirSync(dir)) {
      if (!name.endsWith('.json')) continue;
      const file = path.join(dir, name);
      const c = readClaim(file);
      // Its own (a restart on this data dir), or its holder gone: taken over.
      if (!c || path.resolve(c.dataDir) === ownDir || !holderAlive(c)) fs.rmSync(file, { force: true });
      else others.push(c);
    }
    const index = candidates.findIndex((ranges) => !others.some((o) => overlaps(o.ranges, ranges)));
    if (index < 0) {
      const holder = others.find((o) => overlaps(o.ranges, candidates[0]))!;
      const more = candidates.length > 1 ? ` (and the ${candidates.length - 1} other block(s) it would take are claimed too)` : '';
      throw new UidClaimConflict(
        `job uids ${rangesText(candidates[0])} overlap uids ${rangesText(holder.ranges)} claimed by another GPUPlane agent on this machine (data dir ${holder.dataDir}, pid ${holder.pid})${more}: two agents sharing a uid would run their jobs as one user; give this agent a range of its own with ${flag}`,
      );
    }
    const ranges = candidates[index];
    const record: UidClaimRecord = { ranges, dataDir: ownDir, pid: process.pid, startTime: processStartTime(process.pid), nonce: randomBytes(8).toString('hex') };
    const file = path.join(dir, `${ranges[0][0]}-${ranges[ranges.length - 1][1]}.json`);
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(record), { mode: 0o644 });
    fs.renameSync(tmp, file);
    return { claim: new UidClaim(file, record), index };
  });
}
