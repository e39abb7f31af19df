import { describe, expect, it } from 'vitest';
import { isLeftover, readProcEntry, type Keep, type ProcEntry, type SweepTarget } from '../activities/gpu-host/leftovers.ts';

/** The attempt that ended: shim 500 (its session and group), run as job user 3000007. */
const target: SweepTarget = { pid: 500, startTime: 1000, uid: 3_000_007 };
const none: Keep = { shims: new Set(), attempts: new Set() };
const proc = (p: Partial<ProcEntry>): ProcEntry => ({ pid: 900, uid: 3_000_007, sid: 900, pgid: 900, zombie: false, ...p });
const ctx = (o: { attempt?: string | null; start?: number; reusedSince?: number | null } = {}) => ({
  self: 42,
  attemptOf: () => o.attempt ?? null,
  startOf: () => o.start ?? 0,
  reusedSince: o.reusedSince ?? null,
});

describe('what an ended attempt left behind', () => {
  it("takes its session's and its group's members, whatever their uid", () => {
    expect(isLeftover(proc({ sid: 500, uid: 0 }), target, none, ctx())).toBe(true);
    expect(isLeftover(proc({ pgid: 500, uid: 1234 }), { ...target, uid: null }, none, ctx())).toBe(true);
  });

  it("takes its job user's setsid child, which names this attempt or none", () => {
    expect(isLeftover(proc({}), target, none, ctx({ attempt: 'job-a.1' }))).toBe(true);
    expect(isLeftover(proc({}), target, none, ctx())).toBe(true);
  });

  it("spares another live attempt of the project: its session, its group, and what names it", () => {
    const keep: Keep = { shims: new Set([700]), attempts: new Set(['job-b.1']) };
    expect(isLeftover(proc({ sid: 700 }), target, keep, ctx())).toBe(false);
    expect(isLeftover(proc({ pgid: 700 }), target, keep, ctx())).toBe(false);
    expect(isLeftover(proc({}), target, keep, ctx({ attempt: 'job-b.1' }))).toBe(false);
    // Naming an attempt that is not live (or not its project's) spares nothing.
    expect(isLeftover(proc({}), target, keep, ctx({ attempt: 'job-c.1' }))).toBe(true);
  });

  it('never takes root by uid, another uid, the agent, init or a zombie', () => {
    expect(isLeftover(proc({ uid: 0 }), { ...target, uid: 0 }, none, ctx())).toBe(false);
    expect(isLeftover(proc({ uid: 3_000_008 }), target, none, ctx())).toBe(false);
    expect(isLeftover(proc({ pid: 42, sid: 500 }), target, none, ctx())).toBe(false);
    expect(isLeftover(proc({ pid: 1, sid: 500 }), target, none, ctx())).toBe(false);
    expect(isLeftover(proc({ zombie: true }), target, none, ctx())).toBe(false);
    // A child of the agent's own (an attempt's checkpoint scanner runs as the job's user).
    expect(isLeftover(proc({ ppid: ctx().self }), target, none, ctx())).toBe(false);
    // Without a job user only the session and group count.
    expect(isLeftover(proc({}), { ...target, uid: null }, none, ctx())).toBe(false);
  });

  it("spares its uid's processes on another isolated node (another network namespace of the agent's user namespace), not a job's own namespace", () => {
    const own = { net: 'net:[1]', user: 'user:[1]' };
    const at = (ns: { net: string; user: string }) => ({ ...ctx(), own, nsOf: (_pid: number, kind: 'net' | 'user') => ns[kind] });
    expect(isLeftover(proc({}), target, none, at({ net: 'net:[2]', user: 'user:[1]' }))).toBe(false);
    // unshare -rn: a network namespace in a user namespace of the job's own is still swept.
    expect(isLeftover(proc({}), target, none, at({ net: 'net:[3]', user: 'user:[9]' }))).toBe(true);
    expect(isLeftover(proc({}), target, none, at(own))).toBe(true);
  });

  it("leaves the session of a newer process that took the shim's pid, and of a live shim that has it", () => {
    const other = proc({ sid: 500, uid: 1234 });
    expect(isLeftover(other, target, none, ctx({ reusedSince: 5000, start: 6000 }))).toBe(false);
    expect(isLeftover(other, target, none, ctx({ reusedSince: 5000, start: 4000 }))).toBe(true);
    expect(isLeftover(other, target, { shims: new Set([500]), attempts: new Set() }, ctx())).toBe(false);
  });

  it('reads its own process from /proc', () => {
    const me = readProcEntry(process.pid);
    expect(me).toMatchObject({ pid: process.pid, uid: process.getuid?.(), zombie: false });
    // 0 where the session's leader lives outside this pid namespace (a CI container): a real sid all the same.
    expect(me!.sid).toBeGreaterThanOrEqual(0);
    expect(readProcEntry(2 ** 30)).toBeNull();
  });
});
