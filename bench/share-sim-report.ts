/** bench/share-sim's table: GPUPlane's figures beside the peer's, with their ratios. */
import type { Figures } from './share-sim-model.ts';

const pc = (x: number | null) => (x === null ? '—' : `${(x * 100).toFixed(1)} %`);
const num = (x: number | null, d = 0) => (x === null ? '—' : x.toFixed(d));
const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? '—' : `${(a / b).toFixed(2)}×`);

/** Prints the figures of both schedulers, one row a measure, through `say`. */
export function printTable(g: Figures, p: Figures, say: (s: string) => void): void {
  const rows: [string, string, string, string][] = [
    ['', 'GPUPlane', 'peer (plain order)', 'GPUPlane / peer'],
    ['utilisation while anyone waits', pc(g.utilisationWhileWaiting), pc(p.utilisationWhileWaiting), ratio(g.utilisationWhileWaiting, p.utilisationWhileWaiting)],
    ['  idle on nodes the guard reserved', pc(g.idleReserved), pc(p.idleReserved), ''],
    ['  idle elsewhere (fragments)', pc(g.idleElsewhere), pc(p.idleElsewhere), ''],
    ['minutes with a queue', num(g.waitingMinutes, 1), num(p.waitingMinutes, 1), ''],
    ['quota shortfall, all projects', pc(g.shortfall), pc(p.shortfall), ratio(g.shortfall, p.shortfall)],
  ];
  g.projects.forEach((gp, i) => {
    const pp = p.projects[i];
    const name = `project ${gp.project} (quota ${gp.quota})`;
    rows.push(
      [`${name}: minutes demand ≥ quota`, num(gp.demandMinutes, 1), num(pp.demandMinutes, 1), ''],
      [`${name}: mean shortfall`, pc(gp.meanShortfall), pc(pp.meanShortfall), ratio(gp.meanShortfall, pp.meanShortfall)],
      [`${name}: worst 60 s shortfall`, pc(gp.worstWindowShortfall), pc(pp.worstWindowShortfall), ratio(gp.worstWindowShortfall, pp.worstWindowShortfall)],
      [`${name}: wait within quota, s (starts)`, `${num(gp.withinQuotaWaitS)} (${gp.withinQuotaStarts})`, `${num(pp.withinQuotaWaitS)} (${pp.withinQuotaStarts})`, ratio(gp.withinQuotaWaitS, pp.withinQuotaWaitS)],
    );
  });
  rows.push(
    ['preemptions (jobs preempted again)', `${g.preemptions} (${g.preemptedAgain})`, `${p.preemptions}`, ''],
    ['  for a waiter within quota only by stale holders', `${g.preemptionsForStaleQuota}`, '—', ''],
    ['  again for a waiter its earlier victims freed cards for', `${g.preemptionsForSameWaiter}`, '—', ''],
    ['card-minutes lost to preemption', num(g.lostCardMinutes, 1), num(p.lostCardMinutes, 1), ''],
    ['jobs completed', `${g.completed}`, `${p.completed}`, ratio(g.completed, p.completed)],
    ['attempts started; mean queue wait, s', `${g.started}; ${num(g.meanWaitS)}`, `${p.started}; ${num(p.meanWaitS)}`, ratio(g.meanWaitS, p.meanWaitS)],
    ['longest queue wait, s (its cards)', `${g.longestWaitS} (${g.longestWaitGpus})`, `${p.longestWaitS} (${p.longestWaitGpus})`, ratio(g.longestWaitS, p.longestWaitS)],
    ['still queued at the end', `${g.stillQueued}`, `${p.stillQueued}`, ''],
  );
  const w = [0, 1, 2, 3].map((c) => Math.max(...rows.map((r) => r[c].length)));
  for (const r of rows) say(r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  '));
}
