/**
 * bench/lost: how long a node killed whole takes to have its attempt LOST, with the peer
 * witnesses (issue 46, docs/outage-rule.md "Peer witnesses") and with the old rule alone (LOST
 * only after lost-after), side by side in one run; and a control-plane outage with the witnesses
 * on, which must lose nothing.
 *
 *   node --import tsx bench/lost.ts [--kills 20 --nodes 6 --batch 2 --old-kills 20 --old-nodes 5
 *     --heartbeat-timeout 10 --lost-after 75 --dead-after 5 --outage 60 --out FILE]
 *
 * Three clusters of isolated nodes (runtime/isolated-nodes.ts; subnets 60, 61 and 62, used by no
 * test), each node one card and one job pinned to it, on the same shared PostgreSQL and Temporal
 * as a test run (the outage cluster has its own of each, to stop them):
 *  - witnesses ON (GPUPLANE_DEAD_AFTER_S=--dead-after): `--kills` nodes killed `--batch` at a
 *    time out of `--nodes` (the rule needs most of the rest of the cluster heard, so never most at
 *    once), each revived with a fresh job before the next batch;
 *  - witnesses OFF (GPUPLANE_DEAD_AFTER_S=0), at the same time: `--old-kills` nodes killed all
 *    `--old-nodes` at a time (the old rule needs nothing of the others; each batch waits out
 *    lost-after);
 *  - then the outage, witnesses ON: Temporal, PostgreSQL and the control worker SIGSTOPped for
 *    `--outage` s with a job on each of 4 nodes; `--outage 0` skips it.
 * Kill → LOST is the attempt's LOST transition in the job's history (the database's clock on
 * this machine) less the time just before the kill. Every process runs on this machine.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { livenessPlan } from '../domain/liveness.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { jobUsersSkipReason } from '../test/support/job-users.ts';
import { startSharedServices, type RunningServices } from '../test/support/services.ts';
import { killRounds, outage, type KillSample } from './lost-kills.ts';

const { values: args } = parseArgs({
  options: {
    kills: { type: 'string', default: '20' },
    nodes: { type: 'string', default: '6' },
    batch: { type: 'string', default: '2' },
    'old-kills': { type: 'string', default: '20' },
    'old-nodes': { type: 'string', default: '5' },
    'heartbeat-timeout': { type: 'string', default: '10' },
    'lost-after': { type: 'string', default: '75' },
    'dead-after': { type: 'string', default: '5' },
    outage: { type: 'string', default: '60' },
    out: { type: 'string', default: `bench/results/lost-${new Date().toISOString().slice(0, 10)}.json` },
  },
  strict: true,
});
const num = (k: keyof typeof args) => Number(args[k]);
const HB = num('heartbeat-timeout');
const LOST_AFTER = num('lost-after');
const say = (s: string) => process.stdout.write(`${s}\n`);
const f1 = (x: number) => x.toFixed(1);

/** The nearest-rank percentile of `xs` (p in 0 … 100). */
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

function summary(samples: KillSample[]) {
  const xs = samples.map((s) => s.lost_s);
  return { kills: xs.length, p50_s: percentile(xs, 50), p99_s: percentile(xs, 99), min_s: Math.min(...xs), max_s: Math.max(...xs), by_peer_rule: samples.filter((s) => /declared dead/.test(s.reason ?? '')).length };
}

function cluster(services: RunningServices, name: string, subnet: number, users: string, nodes: string[], deadAfterS: number, own = false): Promise<Cluster> {
  return startCluster(
    name,
    {
      isolate: { subnet },
      heartbeatTimeoutS: HB,
      lostAfterS: LOST_AFTER,
      env: deadAfterS > 0 ? { GPUPLANE_DEAD_AFTER_S: String(deadAfterS), GPUPLANE_PEER_PORT: '0' } : { GPUPLANE_DEAD_AFTER_S: '0' },
      ...(own ? { ownTemporal: {}, ownPostgres: true } : {}),
      agents: nodes.map((nodeId) => ({ nodeId, gpus: 1, labels: { slot: nodeId }, env: { GPUPLANE_JOB_USERS: users } })),
    },
    services,
  );
}

async function main() {
  const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces');
  if (skip) throw new Error(`bench/lost: ${skip}`);
  const load = os.loadavg();
  const started = Date.now();
  const plan = livenessPlan(LOST_AFTER * 1000, 2000);
  say(`bench/lost: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), load average ${load.map(f1).join(' ')} at the start`);
  say(`  heartbeat timeout ${HB} s, lost-after ${LOST_AFTER} s (agents fence after ${f1(plan.fenceAfterMs / 1000)} s), dead-after ${num('dead-after')} s with witnesses`);
  const services = await startSharedServices('lost');
  const ids = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i + 1}`);
  const onNodes = ids('lw', num('nodes'));
  const offNodes = ids('lo', num('old-nodes'));
  const result: Record<string, unknown> = {
    at: new Date().toISOString(),
    command: `node --import tsx bench/lost.ts ${process.argv.slice(2).join(' ')}`.trim(),
    machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model, load_average_at_start: load, memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    settings: { ...args },
  };
  try {
    const on = await cluster(services, 'lost-on', 60, '3860000-3860099', onNodes, num('dead-after'));
    const off = await cluster(services, 'lost-off', 61, '3860100-3860199', offNodes, 0);
    try {
      say(`  witnesses ON: ${onNodes.length} nodes, ${args.kills} kills, ${args.batch} at a time; witnesses OFF (at the same time): ${offNodes.length} nodes, ${args['old-kills']} kills, all ${offNodes.length} at a time`);
      const [withWitnesses, oldRule] = await Promise.all([
        killRounds(on, { label: 'ON ', nodes: onNodes, batch: num('batch'), kills: num('kills'), witnessed: true, lostAfterS: LOST_AFTER }),
        killRounds(off, { label: 'OFF', nodes: offNodes, batch: offNodes.length, kills: num('old-kills'), witnessed: false, lostAfterS: LOST_AFTER }),
      ]);
      result.witnesses_on = { ...summary(withWitnesses), samples: withWitnesses };
      result.witnesses_off = { ...summary(oldRule), samples: oldRule };
    } finally {
      await Promise.all([on.stop(), off.stop()]);
    }
    if (num('outage') > 0) {
      const outNodes = ids('lu', 4);
      const c = await cluster(services, 'lost-outage', 62, '3860200-3860299', outNodes, num('dead-after'), true);
      try {
        result.outage = await outage(c, outNodes, num('outage'));
      } finally {
        await c.stop();
      }
    }
  } finally {
    await services.stop();
  }
  result.load_average_at_end = os.loadavg();
  result.wall_s = Math.round((Date.now() - started) / 1000);
  const row = (name: string, s: ReturnType<typeof summary>) => say(`${name}: ${s.kills} kills, kill → LOST p50 ${f1(s.p50_s)} s, p99 ${f1(s.p99_s)} s (min ${f1(s.min_s)}, max ${f1(s.max_s)}; ${s.by_peer_rule} by the peer rule)`);
  row('witnesses ON ', result.witnesses_on as ReturnType<typeof summary>);
  row('witnesses OFF', result.witnesses_off as ReturnType<typeof summary>);
  if (result.outage) {
    const o = result.outage as Awaited<ReturnType<typeof outage>>;
    say(`outage ${o.seconds} s, witnesses ON: ${o.attempts_lost} attempts lost, ${o.second_attempts} second attempts of ${o.jobs} jobs, ${o.declared_dead} nodes declared dead; verdicts other than fine seen: ${o.verdicts_seen.length ? o.verdicts_seen.join('; ') : 'none'}`);
  }
  say(`wall ${result.wall_s} s, load average ${(result.load_average_at_end as number[]).map(f1).join(' ')} at the end`);
  fs.mkdirSync(path.dirname(args.out), { recursive: true });
  fs.writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
  say(`written to ${args.out}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
