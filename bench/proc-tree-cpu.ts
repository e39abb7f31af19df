/**
 * CPU accounting for bench/metrics from /proc: a process and all its descendants, in seconds, and
 * what every core did besides (`machine`, shown as `others`).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

function procTable(): Map<number, { ppid: number; own: number; reaped: number }> {
  const t = new Map<number, { ppid: number; own: number; reaped: number }>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      // Fields after the name: state ppid … utime(12) stime(13) cutime(14) cstime(15).
      t.set(Number(d), { ppid: Number(f[1]), own: (Number(f[11]) + Number(f[12])) / CLK_TCK, reaped: (Number(f[13]) + Number(f[14])) / CLK_TCK });
    } catch {
      // Gone meanwhile.
    }
  }
  return t;
}

/** CPU seconds of each named tree: the root's own and reaped children's, plus live descendants'. */
export function cpuOf(roots: Record<string, number | undefined>): Record<string, number> {
  const t = procTable();
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(roots)) {
    if (pid === undefined || !t.has(pid)) continue;
    let sum = t.get(pid)!.own + t.get(pid)!.reaped;
    const stack = [pid];
    while (stack.length) {
      const p = stack.pop()!;
      for (const [c, e] of t) {
        if (e.ppid === p) {
          sum += e.own + e.reaped;
          stack.push(c);
        }
      }
    }
    out[name] = sum;
  }
  const me = process.cpuUsage();
  out.bench = (me.user + me.system) / 1e6;
  // Every core's busy time, so what other processes took from the same cores shows too.
  const all = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  out.machine = (all.reduce((a, b) => a + b, 0) - all[3] - all[4]) / CLK_TCK;
  return out;
}
/** CPU seconds between two samples; `machine` becomes `others`: what no process of this bench used. */
export function cpuDelta(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const d = Object.fromEntries(Object.keys(b).filter((k) => k in a && k !== 'machine').map((k) => [k, b[k] - a[k]]));
  const ours = Object.values(d).reduce((s, v) => s + v, 0);
  return { ...d, others: Math.max(0, b.machine - a.machine - ours) };
}
export const cpuLine = (d: Record<string, number>, seconds: number) =>
  Object.entries(d).map(([k, v]) => `${k} ${((100 * v) / seconds).toFixed(0)}%`).join(', ');
