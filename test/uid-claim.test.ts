import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { JobUsers } from '../activities/gpu-host/job-users.ts';
import { claimUids, processStartTime, UidClaimConflict, type UidClaimRecord } from '../activities/gpu-host/uid-claim.ts';

const FLAG = '--job-users A-B (GPUPLANE_JOB_USERS)';
const made: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-uid-claim-'));
  made.push(d);
  return d;
};
afterEach(() => {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A pid no process has any more: a child's, once it exited. */
const deadPid = () => spawnSync('true').pid!;

const claimFiles = (dir: string) => fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
const readRecord = (dir: string, name: string) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as UidClaimRecord;

describe('claiming job uids machine-wide (issue 40)', () => {
  it('refuses a range that overlaps another live agent\'s claim, in one line naming that agent and the flag', () => {
    const claims = tmp();
    const [a, b] = [tmp(), tmp()];
    const first = claimUids([[[5000, 5099]]], a, FLAG, claims);
    expect(readRecord(claims, '5000-5099.json')).toMatchObject({ ranges: [[5000, 5099]], dataDir: a, pid: process.pid, startTime: processStartTime(process.pid) });
    let err: unknown;
    try {
      claimUids([[[5050, 5149]]], b, FLAG, claims);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UidClaimConflict);
    const msg = (err as Error).message;
    expect(msg).not.toContain('\n');
    expect(msg).toBe(
      `job uids 5050-5149 overlap uids 5000-5099 claimed by another GPUPlane agent on this machine (data dir ${a}, pid ${process.pid}): two agents sharing a uid would run their jobs as one user; give this agent a range of its own with --job-users A-B (GPUPLANE_JOB_USERS)`,
    );
    // A range apart is the other agent's to take; once the first lets go, its range is free.
    expect(claimUids([[[5100, 5199]]], b, FLAG, claims).index).toBe(0);
    first.claim.release();
    expect(claimFiles(claims)).toEqual(['5100-5199.json']);
    expect(claimUids([[[5000, 5099]]], tmp(), FLAG, claims).index).toBe(0);
  });

  it('takes over a claim whose agent is gone: no such pid, or the pid of a later process', () => {
    const claims = tmp();
    const other = tmp();
    const stale = (pid: number, startTime: string | null, lo: number) =>
      fs.writeFileSync(path.join(claims, `${lo}-${lo + 99}.json`), JSON.stringify({ ranges: [[lo, lo + 99]], dataDir: other, pid, startTime, nonce: 'x' }));
    stale(deadPid(), '1', 6000);
    // This very pid, but started at another time: a reused pid, not the agent that claimed.
    stale(process.pid, '1', 6100);
    const mine = tmp();
    expect(claimUids([[[6000, 6199]]], mine, FLAG, claims).index).toBe(0);
    expect(claimFiles(claims)).toEqual(['6000-6199.json']);
    expect(readRecord(claims, '6000-6199.json').dataDir).toBe(mine);
    // A lock left by a dead process does not hold the next claim up.
    fs.writeFileSync(path.join(claims, '.lock'), JSON.stringify({ pid: deadPid(), startTime: '1' }));
    expect(claimUids([[[6200, 6299]]], other, FLAG, claims).index).toBe(0);
    expect(fs.existsSync(path.join(claims, '.lock'))).toBe(false);
  });

  it('gives an agent restarting on the same data dir its own claim back, and an old holder never removes the new claim', () => {
    const claims = tmp();
    const dir = tmp();
    const before = claimUids([[[7000, 7099]]], dir, FLAG, claims);
    // Still live (the same process): the same data dir is the same agent (a restart after --on-stop detach).
    const again = claimUids([[[7000, 7049]]], `${dir}/`, FLAG, claims);
    expect(claimFiles(claims)).toEqual(['7000-7049.json']);
    before.claim.release();
    expect(claimFiles(claims)).toEqual(['7000-7049.json']);
    again.claim.release();
    expect(claimFiles(claims)).toEqual([]);
  });

  it('picks, for gpuctl up, the first free block of 1000 from the default, its own block first, and claims nothing for an agent that is not root', () => {
    const claims = tmp();
    const taken = claimUids([[[3000000, 3000999]]], tmp(), FLAG, claims);
    const up = tmp();
    const users = JobUsers.claimed(undefined, up, { pickFree: true, claimsDir: claims, isRoot: true })!;
    expect(users.describe()).toBe('uids 3001000-3001999');
    // Without pickFree (gpuctl agent), the default pool is refused, not moved.
    expect(() => JobUsers.claimed(undefined, tmp(), { claimsDir: claims, isRoot: true })).toThrow(/^job uids 3000000-3000999 overlap uids 3000000-3000999 claimed by another GPUPlane agent on this machine \(data dir .*\): .*--job-users A-B/);
    // An explicit range is that range or nothing.
    expect(() => JobUsers.claimed('3001500-3001599', tmp(), { pickFree: true, claimsDir: claims, isRoot: true })).toThrow(/^job uids 3001500-3001599 overlap uids 3001000-3001999/);
    // A plane whose projects already have uids in a block takes that block again, before the others.
    const home = tmp();
    fs.writeFileSync(path.join(home, 'job-users.json'), JSON.stringify({ a: 3004002 }));
    taken.claim.release();
    const back = JobUsers.claimed(undefined, home, { pickFree: true, claimsDir: claims, isRoot: true })!;
    expect(back.describe()).toBe('uids 3004000-3004999');
    expect(back.forProject('a').uid).toBe(3004002);
    users.release();
    back.release();
    expect(claimFiles(claims)).toEqual([]);
    // Not root: jobs run as the agent's user, and nothing is claimed (nor the folder needed).
    expect(JobUsers.claimed(undefined, tmp(), { claimsDir: path.join(claims, 'none'), isRoot: false })).toBeNull();
    expect(fs.existsSync(path.join(claims, 'none'))).toBe(false);
  });

  it('leaves the pool unclaimed, and says why, where the claims folder cannot be made', () => {
    // sysfs takes no folder, even from root: as a read-only /run would.
    const users = JobUsers.claimed('5000-5009', tmp(), { claimsDir: '/sys/gpuplane-uid-claim-test/uids', isRoot: true })!;
    expect(users.claimProblem).toMatch(/^\/sys\/gpuplane-uid-claim-test\/uids is not writable \((EPERM|EACCES|EROFS)\)$/);
    expect(users.describe()).toBe('uids 5000-5009');
    users.release();
  });
});
