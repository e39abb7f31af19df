/**
 * What an attempt leaves behind once its command has ended, found in /proc and SIGKILLed: the
 * members of its session and of its process group (what a child that changed its group but not
 * its session still shares) and, for an attempt run as a job user, every process of that user
 * that no other live attempt of its project on this node answers for. A child that called
 * `setsid` leaves the session and the group but not its uid: without cgroups (cgroup.ts) the uid
 * is what still ties it to its project. Without job users (jobs run as the agent's own user) only
 * the session and the group can be used, and a `setsid` child outlives its job.
 */
import fs from 'node:fs';

/** A process as the sweep reads it from /proc/PID/status. */
export interface ProcEntry {
  pid: number;
  /** Real uid. */
  uid: number;
  sid: number;
  pgid: number;
  zombie: boolean;
  /** Its parent: a child of the agent itself (an attempt's checkpoint scanner, which runs as the job's user) is never a leftover. */
  ppid?: number;
}

/** The attempt whose leftovers are swept. */
export interface SweepTarget {
  /** Its shim's pid: the id of its session and of its process group. */
  pid: number;
  /** The shim's start time (clock ticks since boot, /proc/PID/stat), to tell a reused pid; null: unknown. */
  startTime: number | null;
  /** The job user it ran as; null: the agent's own user (no uid sweep). */
  uid: number | null;
}

/** Other attempts that still run: their processes are theirs, not leftovers. */
export interface Keep {
  /** Their shims' pids: their sessions and process groups (which no process can join from outside). */
  shims: Set<number>;
  /** `job.attempt` of those of the same job user: a process whose environment names one is kept. */
  attempts: Set<string>;
}

/** What the sweep needs of an attempt the agent runs (process-table.ts Live). */
export interface RunningAttempt {
  jobId: string;
  attempt: number;
  pid: number;
  /** The shim's start time as processStartTime gives it; while the pid has it, the attempt runs. */
  startTime?: string;
  uid?: number | null;
}

export function sweepTargetOf(a: RunningAttempt): SweepTarget {
  const start = Number(a.startTime);
  return { pid: a.pid, startTime: a.startTime && Number.isFinite(start) ? start : null, uid: a.uid ?? null };
}

/** The attempts among `all` that still run (their shims live), besides `a`, as a Keep for `a`'s sweep. */
export function keepBesides(a: RunningAttempt, all: Iterable<RunningAttempt>, proc = '/proc'): Keep {
  const keep: Keep = { shims: new Set(), attempts: new Set() };
  for (const e of all) {
    if (e === a || !e.startTime || String(startTicks(e.pid, proc)) !== e.startTime) continue;
    keep.shims.add(e.pid);
    // Only its own project's: a process could name any attempt in its environment.
    if (e.uid != null && e.uid === a.uid) keep.attempts.add(`${e.jobId}.${e.attempt}`);
  }
  return keep;
}

/** /proc/PID/status as a ProcEntry; null for a process that is gone. A kernel older than 4.1 has no NSsid: the uid still counts. */
export function readProcEntry(pid: number, proc = '/proc'): ProcEntry | null {
  let text: string;
  try {
    text = fs.readFileSync(`${proc}/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  // The first of each: the real uid, and the ids as this /proc's pid namespace (the agent's) sees them.
  const fields: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon);
    if (name === 'State' || name === 'Uid' || name === 'NSsid' || name === 'NSpgid' || name === 'PPid') fields[name] = line.slice(colon + 1).trim().split(/\s+/)[0];
  }
  const [uid, sid, pgid] = [Number(fields.Uid), Number(fields.NSsid ?? -1), Number(fields.NSpgid ?? -1)];
  if (![uid, sid, pgid].every(Number.isInteger)) return null;
  return { pid, uid, sid, pgid, zombie: fields.State === 'Z', ppid: Number(fields.PPid) };
}

/** `job.attempt` from a process's environment (GPUPLANE_JOB_ID, GPUPLANE_ATTEMPT), or null. */
export function attemptOfProcess(pid: number, proc = '/proc'): string | null {
  try {
    const env = fs.readFileSync(`${proc}/${pid}/environ`, 'latin1').split('\0');
    const get = (k: string) => env.find((e) => e.startsWith(`${k}=`))?.slice(k.length + 1);
    const [job, attempt] = [get('GPUPLANE_JOB_ID'), get('GPUPLANE_ATTEMPT')];
    return job && attempt ? `${job}.${attempt}` : null;
  } catch {
    return null;
  }
}

/** A namespace of a process (`net:[inode]`), or null where it cannot be read. */
function nsOf(pid: string, kind: 'net' | 'user', proc: string): string | null {
  try {
    return fs.readlinkSync(`${proc}/${pid}/ns/${kind}`);
  } catch {
    return null;
  }
}

/**
 * One project runs as one uid on every node, and the isolated fake nodes of one machine share its
 * pids: a process of that uid in another network namespace made in this agent's own user namespace
 * is another node's, never this attempt's leftover. Only root makes such a namespace (a job has no
 * capabilities); a job that makes its own (`unshare -rn`) does so in a user namespace of its own,
 * and is still swept.
 */
function isAnotherNodes(pid: number, ctx: { nsOf?(pid: number, kind: 'net' | 'user'): string | null; own?: { net: string | null; user: string | null } }): boolean {
  if (!ctx.nsOf || !ctx.own?.net || !ctx.own.user) return false;
  const net = ctx.nsOf(pid, 'net');
  return net !== null && net !== ctx.own.net && ctx.nsOf(pid, 'user') === ctx.own.user;
}

/** Field 22 of /proc/PID/stat as a number, or null. */
function startTicks(pid: number, proc: string): number | null {
  try {
    const stat = fs.readFileSync(`${proc}/${pid}/stat`, 'utf8');
    const n = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

/**
 * Whether `p` is a leftover of `t`. Never the agent or a child of its own (a checkpoint scanner
 * runs as the job's user, checkpoint-scanner.ts; no job's process can make itself one), pid 1, root's processes by uid, or a uid
 * other than the attempt's own; never a member of another live attempt's session or group; and
 * never a process that joined the session of a newer process that took the shim's pid.
 */
export function isLeftover(
  p: ProcEntry,
  t: SweepTarget,
  keep: Keep,
  ctx: {
    self: number;
    attemptOf(pid: number): string | null;
    startOf(pid: number): number | null;
    reusedSince: number | null;
    nsOf?(pid: number, kind: 'net' | 'user'): string | null;
    own?: { net: string | null; user: string | null };
  },
): boolean {
  if (p.zombie || p.pid <= 1 || p.pid === ctx.self || p.ppid === ctx.self || keep.shims.has(p.sid) || keep.shims.has(p.pgid)) return false;
  if ((p.sid === t.pid || p.pgid === t.pid) && !keep.shims.has(t.pid)) {
    const start = ctx.reusedSince === null ? null : ctx.startOf(p.pid);
    if (ctx.reusedSince === null || (start !== null && start < ctx.reusedSince)) return true;
  }
  if (t.uid === null || t.uid === 0 || p.uid !== t.uid) return false;
  if (isAnotherNodes(p.pid, ctx)) return false;
  const named = ctx.attemptOf(p.pid);
  return named === null || !keep.attempts.has(named);
}

/** Since when another process holds the shim's pid (its start ticks), or null while the pid is unused or still the shim's. */
function pidReusedSince(t: SweepTarget, proc: string): number | null {
  const now = startTicks(t.pid, proc);
  return now === null || t.startTime === null || now === t.startTime ? null : now;
}

/** One pass over /proc: the leftovers of `t` now. */
export function findLeftovers(t: SweepTarget, keep: Keep, proc = '/proc'): number[] {
  const ctx = {
    self: process.pid,
    attemptOf: (pid: number) => attemptOfProcess(pid, proc),
    startOf: (pid: number) => startTicks(pid, proc),
    reusedSince: pidReusedSince(t, proc),
    nsOf: (pid: number, kind: 'net' | 'user') => nsOf(String(pid), kind, proc),
    own: { net: nsOf('self', 'net', proc), user: nsOf('self', 'user', proc) },
  };
  const out: number[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(proc);
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const p = readProcEntry(Number(name), proc);
    if (p && isLeftover(p, t, keep, ctx)) out.push(p.pid);
  }
  return out;
}

/** Passes until one finds nothing new: what forks between a pass and its kills is found by the next. */
const MAX_PASSES = 25;

/**
 * SIGKILLs the leftovers of `t`, pass after pass until none is new (a process that forks faster
 * than it is found is bounded by its pids limit, where there is one). Synchronous on purpose: no
 * attempt can start between the look at the live attempts and the kills. Returns how many it killed.
 */
export function sweepLeftovers(t: SweepTarget, keep: Keep, proc = '/proc'): number {
  const killed = new Set<number>();
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    const fresh = findLeftovers(t, keep, proc).filter((pid) => !killed.has(pid));
    if (!fresh.length) break;
    for (const pid of fresh) {
      killed.add(pid);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  }
  return killed.size;
}
