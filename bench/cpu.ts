/**
 * CPU time of the processes of a benchmark, read from /proc: each role's root processes and
 * everything below them (live descendants, plus the children they reaped: an agent's job shims
 * and jobs). On a saturated 2-core machine a sampling profile inflates whoever waits for a core;
 * these are the kernel's own counts.
 */
import fs from 'node:fs';

const TICK_MS = 10; // USER_HZ is 100 on Linux

interface Stat {
  ppid: number;
  /** utime + stime + cutime + cstime, in ms. */
  ms: number;
}

function readStat(pid: number): Stat | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14-17.
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    return { ppid: Number(f[1]), ms: ticks * TICK_MS };
  } catch {
    return null;
  }
}

function allStats(): Map<number, Stat> {
  const m = new Map<number, Stat>();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const s = readStat(Number(e));
    if (s) m.set(Number(e), s);
  }
  return m;
}

/** Pids whose command line holds every one of `parts`. */
export function pidsMatching(...parts: string[]): number[] {
  const out: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (parts.every((p) => cmd.includes(p))) out.push(Number(e));
    } catch {
      // gone
    }
  }
  return out;
}

/** CPU ms of each role: its roots and their whole trees. A pid in two roles' trees counts once, for the first. */
export function cpuSnapshot(roles: Record<string, number[]>): Record<string, number> {
  const stats = allStats();
  const kids = new Map<number, number[]>();
  for (const [pid, s] of stats) kids.set(s.ppid, [...(kids.get(s.ppid) ?? []), pid]);
  const seen = new Set<number>();
  const out: Record<string, number> = {};
  for (const [role, roots] of Object.entries(roles)) {
    let ms = 0;
    const stack = [...roots];
    while (stack.length) {
      const pid = stack.pop()!;
      if (seen.has(pid)) continue;
      seen.add(pid);
      ms += stats.get(pid)?.ms ?? 0;
      stack.push(...(kids.get(pid) ?? []));
    }
    out[role] = ms;
  }
  return out;
}

/** What each role spent between two snapshots, per job, as `role 12.3 ms` pieces, largest first. */
export function cpuPerJob(before: Record<string, number>, after: Record<string, number>, jobs: number): { text: string; total: number; byRole: Record<string, number> } {
  const byRole: Record<string, number> = {};
  for (const role of Object.keys(after)) byRole[role] = (after[role] - (before[role] ?? 0)) / jobs;
  const total = Object.values(byRole).reduce((a, b) => a + b, 0);
  const text = Object.entries(byRole)
    .sort((a, b) => b[1] - a[1])
    .map(([r, v]) => `${r} ${v.toFixed(1)}`)
    .join(', ');
  return { text: `${total.toFixed(1)} ms of CPU a job (${text})`, total, byRole };
}

/** CPU ms of each thread of a process, summed by thread name (main thread, libuv pool, tokio, V8 workers...). */
export function threadsOf(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const name = Number(t) === pid ? 'main' : s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      out[name] = (out[name] ?? 0) + (Number(f[11]) + Number(f[12])) * TICK_MS;
    } catch {
      // gone
    }
  }
  return out;
}
