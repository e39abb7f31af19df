/**
 * bench/lost: how long a dead node's attempts take to be LOST and running elsewhere, on the
 * default timing (heartbeat timeout 10 s, lost-after 75 s) or the one given.
 *
 *   node --import tsx bench/lost.ts [--heartbeat-timeout 10 --lost-after 75 --jobs 2]
 *
 * A node with `--jobs` one-card jobs running has its agent SIGKILLed and never restarted (the
 * shims fence the jobs: nothing of the node answers any more). Prints, per job, the time from
 * the kill to LOST and to RUNNING on the other node.
 */
import { parseArgs } from 'node:util';
import { livenessPlan } from '../domain/liveness.ts';
import { startCluster } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';

const { values: args } = parseArgs({
  options: {
    'heartbeat-timeout': { type: 'string', default: '10' },
    'lost-after': { type: 'string', default: '75' },
    jobs: { type: 'string', default: '2' },
  },
  strict: true,
});
const HB = Number(args['heartbeat-timeout']);
const LOST_AFTER = Number(args['lost-after']);
const JOBS = Number(args.jobs);
const say = (s: string) => process.stdout.write(`${s}\n`);

async function main() {
  const services = await startSharedServices('lost');
  const plan = livenessPlan(LOST_AFTER * 1000, 2000);
  say(`bench/lost: heartbeat timeout ${HB} s, lost-after ${LOST_AFTER} s (agents fence after ${(plan.fenceAfterMs / 1000).toFixed(1)} s), ${JOBS} jobs on the dying node`);
  const c = await startCluster('lost', { heartbeatTimeoutS: HB, lostAfterS: LOST_AFTER, agents: [{ nodeId: 'doomed', gpus: JOBS }] }, services);
  try {
    const jobs: { id: string }[] = [];
    for (let i = 0; i < JOBS; i++) jobs.push(await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 600' }));
    for (const j of jobs) await c.client.waitFor(j.id, ['RUNNING'], 60_000);
    await c.addAgent({ nodeId: 'spare', gpus: JOBS });
    const killedAt = Date.now();
    await c.agents.get('doomed')!.kill('SIGKILL');
    const lost = new Map<string, number>();
    const elsewhere = new Map<string, number>();
    await until(
      'every job running on the spare node',
      async () => {
        for (const j of jobs) {
          const d = await c.client.job(j.id);
          if (!lost.has(j.id) && d.attempts[0].state === 'LOST') lost.set(j.id, Date.now() - killedAt);
          if (!elsewhere.has(j.id) && d.attempt === 2 && d.state === 'RUNNING') elsewhere.set(j.id, Date.now() - killedAt);
        }
        return elsewhere.size === jobs.length;
      },
      (LOST_AFTER + 60) * 1000,
      200,
    );
    for (const j of jobs) say(`${j.id}: kill → LOST ${(lost.get(j.id)! / 1000).toFixed(1)} s, kill → RUNNING on the spare node ${(elsewhere.get(j.id)! / 1000).toFixed(1)} s`);
    const worst = Math.max(...elsewhere.values()) / 1000;
    say(`worst kill → running elsewhere: ${worst.toFixed(1)} s (lost-after ${LOST_AFTER} s)`);
    for (const j of jobs) await c.client.cancel(j.id);
  } finally {
    await c.stop();
    await services.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
