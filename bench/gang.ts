/**
 * bench/gang: what multi-node (gang) jobs cost, each figure beside a peer measured in the same
 * run.
 *
 *   node --import tsx bench/gang.ts [--runs 10 --nodes 2,8 --lost-runs 2 --heartbeat-timeout 10 --lost-after 75]
 *
 *  - Start skew: a gang of N nodes × 2 cards (each member a whole node) on an idle cluster of
 *    max(N) fake nodes; each member's command first writes `date +%s%3N`, and the skew is the
 *    last of those minus the first. Peer: N single-node jobs of 2 cards submitted at once, the
 *    spread of their starts, alternating with the gangs. The skew from the members' started_at
 *    (the API's time of each member's start report) is printed too.
 *  - Placement: the planner alone (bench/schedule-pass.ts measurePlan) on 1,000 nodes × 8 cards
 *    and 10,000 queued, 10 % free, 10 % of the queue gangs of 2-8 nodes; peer: the same queue
 *    without gangs.
 *  - Re-queue: a running 2-node gang's rank-1 agent is SIGKILLed; the time from the kill to the
 *    attempt's LOST and to the next attempt's QUEUED (from the history), against lost-after (the
 *    outage rule's bound, docs/outage-rule.md). Peer: a single-node job on the same node, lost by
 *    the same kill. The agent is started again once both are re-queued.
 *
 * Real processes: a throwaway PostgreSQL, a Temporal dev server, `gpuctl control-worker`, `gpuctl
 * api` and one `gpuctl agent --fake-gpus 2` per node (all on this machine).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { JobDetailJson } from '../cli/client.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';
import { measurePlan } from './schedule-pass.ts';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '10' },
    nodes: { type: 'string', default: '2,8' },
    'lost-runs': { type: 'string', default: '2' },
    'heartbeat-timeout': { type: 'string', default: '10' },
    'lost-after': { type: 'string', default: '75' },
    'plan-repeat': { type: 'string', default: '21' },
  },
  strict: true,
});
const RUNS = Number(args.runs);
const SIZES = args.nodes.split(',').map(Number);
const LOST_RUNS = Number(args['lost-runs']);
const HB = Number(args['heartbeat-timeout']);
const LOST_AFTER = Number(args['lost-after']);
const say = (s: string) => process.stdout.write(`${s}\n`);
const lines: string[] = [];
const report = (s: string) => (say(s), lines.push(s));

/** Nearest-rank percentile of a sorted copy. */
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
const spread = (xs: number[]) => Math.max(...xs) - Math.min(...xs);
const summary = (xs: number[]) => `p50 ${pct(xs, 50)} ms, p95 ${pct(xs, 95)} ms, max ${Math.max(...xs)} ms`;

/** A command that first writes its start time (ms) to `dir/<job>-<rank>`, then ends. */
const stamp = (dir: string, then = 'true') => `date +%s%3N > ${dir}/$GPUPLANE_JOB_ID-\${NODE_RANK:-0}; ${then}`;
const stamps = (dir: string, jobId: string) =>
  fs
    .readdirSync(dir)
    .filter((f) => f.startsWith(`${jobId}-`))
    .map((f) => Number(fs.readFileSync(path.join(dir, f), 'utf8').trim()));

async function succeeded(c: Cluster, id: string): Promise<JobDetailJson> {
  const d = await c.client.waitFor(id, undefined, 120_000);
  if (d.state !== 'SUCCEEDED') throw new Error(`${id} ended ${d.state}: ${d.reason ?? ''}`);
  return d;
}

async function startSkew(c: Cluster, n: number): Promise<void> {
  const dir = fs.mkdtempSync(path.join(c.work, `skew-${n}-`));
  const gang: { stamp: number[]; api: number[] } = { stamp: [], api: [] };
  const peer: { stamp: number[]; api: number[] } = { stamp: [], api: [] };
  for (let run = 0; run < RUNS; run++) {
    const g = await c.client.submit({ type: 'CUSTOM', nodes: n, gpus_per_node: 2, command: stamp(dir) });
    const gd = await succeeded(c, g.id);
    const ts = stamps(dir, g.id);
    if (ts.length !== n) throw new Error(`gang ${g.id}: ${ts.length} of ${n} start stamps in ${dir}: ${fs.readdirSync(dir).join(" ")}; command ${JSON.stringify(gd.command)}; logs:\n${gd.attempts[0].members!.map((m) => (m.log_path && fs.existsSync(m.log_path) ? fs.readFileSync(m.log_path, 'utf8') : `(no log ${m.log_path})`)).join('\n')}`);
    gang.stamp.push(spread(ts));
    gang.api.push(spread(gd.attempts[0].members!.map((m) => Date.parse(m.started_at!))));
    const singles = await Promise.all(Array.from({ length: n }, () => c.client.submit({ type: 'CUSTOM', gpus: 2, command: stamp(dir) })));
    const sd = await Promise.all(singles.map((s) => succeeded(c, s.id)));
    peer.stamp.push(spread(singles.flatMap((s) => stamps(dir, s.id))));
    peer.api.push(spread(sd.map((d) => Date.parse(d.attempts[0].started_at!))));
  }
  const ratio = pct(gang.stamp, 50) / Math.max(1, pct(peer.stamp, 50));
  report(`start skew, ${n} nodes × 2 cards, ${RUNS} runs (first to last member's own start stamp): ${summary(gang.stamp)} (target p50 ≤ 500 ms)`);
  report(`  peer: ${n} single-node jobs of 2 cards submitted at once, first to last start: ${summary(peer.stamp)}; gang / peer p50 ${ratio.toFixed(2)}×`);
  report(`  from the API's started_at: gang ${summary(gang.api)}; peer ${summary(peer.api)}`);
}

function placement(): void {
  const shape = { nodes: 1000, queued: 10_000, free: 0.1 };
  const repeat = Number(args['plan-repeat']);
  const withGangs = measurePlan(shape, 0.1, 300_000, repeat);
  const without = measurePlan(shape, 0, 300_000, repeat);
  report(
    `placement (planner alone, bench/schedule-pass.ts measurePlan): 1,000 nodes × 8 cards, 10 % free, 10,000 queued, 10 % gangs of 2-8 nodes → median ${withGangs.medianMs} ms (target ≤ 150 ms; placed ${withGangs.placed}, ${withGangs.gangsPlaced} gangs)`,
  );
  report(`  peer: the same queue without gangs → median ${without.medianMs} ms (placed ${without.placed}); gangs / none ${(withGangs.medianMs / without.medianMs).toFixed(2)}×`);
}

/** When the history says `attempt` went LOST, and when `attempt + 1` was QUEUED (ms since the epoch). */
function lostAndRequeued(d: JobDetailJson, attempt: number): { lost?: number; queued?: number } {
  const at = (to: string, a: number) => d.history.find((h) => h.to === to && h.attempt === a)?.at;
  const lost = at('LOST', attempt);
  const queued = at('QUEUED', attempt + 1);
  return { lost: lost ? Date.parse(lost) : undefined, queued: queued ? Date.parse(queued) : undefined };
}

async function requeue(c: Cluster): Promise<void> {
  const gang: { lost: number[]; queued: number[] } = { lost: [], queued: [] };
  const peer: { lost: number[]; queued: number[] } = { lost: [], queued: [] };
  // Attempt 1 runs until killed; attempt 2 ends at once.
  const command = `if [ "$GPUPLANE_ATTEMPT" = 1 ]; then sleep 600; fi`;
  for (let run = 0; run < LOST_RUNS; run++) {
    const g = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command });
    const running = await c.client.waitFor(g.id, ['RUNNING'], 60_000);
    const victim = running.members![1].node_id;
    const single = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { host: victim }, command });
    await c.client.waitFor(single.id, ['RUNNING'], 60_000);
    const agent = c.agents.get(victim)!;
    const killedAt = Date.now();
    await agent.kill('SIGKILL');
    const seen = await until(
      'both re-queued',
      async () => {
        const [gd, sd] = await Promise.all([c.client.job(g.id), c.client.job(single.id)]);
        const a = lostAndRequeued(gd, 1);
        const b = lostAndRequeued(sd, 1);
        return a.queued && b.queued ? { a, b } : null;
      },
      (LOST_AFTER + 60) * 1000,
      200,
    );
    gang.lost.push(seen.a.lost! - killedAt);
    gang.queued.push(seen.a.queued! - killedAt);
    peer.lost.push(seen.b.lost! - killedAt);
    peer.queued.push(seen.b.queued! - killedAt);
    await agent.start();
    await until(`node ${victim} ONLINE`, async () => (await c.client.nodes()).some((n) => n.id === victim && n.status === 'ONLINE'), 60_000);
    await Promise.all([succeeded(c, g.id), succeeded(c, single.id)]);
  }
  // Below the bound is possible: the node's last heartbeat went out up to a second before the kill.
  const over = (ms: number) => {
    const x = (ms - LOST_AFTER * 1000) / 1000;
    return `bound ${x < 0 ? '−' : '+'} ${Math.abs(x).toFixed(1)} s`;
  };
  const each = (xs: number[]) => xs.map(over).join(', ');
  report(`re-queue, ${LOST_RUNS} runs (bound: lost-after ${LOST_AFTER} s, heartbeat timeout ${HB} s; target bound + ≤ 5 s):`);
  report(`  2-node gang, rank 1's agent SIGKILLed → attempt LOST: ${each(gang.lost)}; → attempt 2 QUEUED: ${each(gang.queued)}`);
  report(`  peer, a single-node job on the same node: → LOST: ${each(peer.lost)}; → QUEUED: ${each(peer.queued)}`);
  const worst = Math.max(...gang.queued) - Math.max(...peer.queued);
  report(`  gang − peer, worst kill → QUEUED: ${(worst / 1000).toFixed(1)} s`);
}

async function main() {
  const maxNodes = Math.max(2, ...SIZES);
  say(`bench/gang: ${maxNodes} fake nodes × 2 cards, ${RUNS} runs per size (${SIZES.join(', ')} nodes), ${LOST_RUNS} re-queue runs, heartbeat timeout ${HB} s, lost-after ${LOST_AFTER} s`);
  placement();
  // Jobs run as the agent's user (as under vitest): an agent running as root would run them as a
  // job user, who cannot write their start stamps into this run's private folder.
  process.env.GPUPLANE_JOB_USERS ??= 'agent';
  const services = await startSharedServices('gang');
  const agents = Array.from({ length: maxNodes }, (_, i) => ({ nodeId: `g${i}`, gpus: 2, labels: { host: `g${i}` } }));
  const c = await startCluster('gang', { heartbeatTimeoutS: HB, lostAfterS: LOST_AFTER, agents }, services);
  try {
    for (const n of SIZES) await startSkew(c, n);
    if (LOST_RUNS > 0) await requeue(c);
  } finally {
    await c.stop();
    await services.stop();
  }
  fs.mkdirSync(path.join('bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join('bench', 'results', 'gang.txt'), `${new Date().toISOString()} node --import tsx bench/gang.ts ${process.argv.slice(2).join(' ')}\n${lines.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
