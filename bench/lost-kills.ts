/**
 * bench/lost's two measures on a running cluster of isolated nodes, each node one card labelled
 * slot=<its id> and running one job pinned there:
 *  - killRounds: nodes killed whole (runtime/isolated-nodes.ts: agent, peer keeper and job at
 *    once), `batch` at a time, each timed from the kill to its attempt's LOST transition (the
 *    job history's time, in the database's clock on this same machine); the nodes are revived and
 *    given a fresh job before the next batch;
 *  - outage: Temporal, PostgreSQL and the control worker all stopped (SIGSTOP) for `seconds`
 *    with a job running on every node; counts the attempts that did not end SUCCEEDED as attempt 1.
 */
import type { JobDetailJson } from '../cli/client.ts';
import type { Cluster } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';

export interface KillSample {
  node: string;
  job: string;
  /** Kill → the attempt's LOST transition, in seconds. */
  lost_s: number;
  /** The attempt's end reason (the peer rule's starts "node X declared dead"). */
  reason: string | null;
}

const say = (s: string) => process.stdout.write(`${s}\n`);

/** The job pinned to `node`: a long sleep on its one card. */
async function pinJob(c: Cluster, node: string): Promise<string> {
  const j = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { slot: node }, command: 'sleep 3600' });
  await c.client.waitFor(j.id, ['RUNNING'], 120_000);
  return j.id;
}

/** Waits until every node is fine and heard by at least two of its witnesses within 2.5 s (the peer rule needs the rest heard). */
export async function untilWitnessed(c: Cluster, timeoutMs = 90_000): Promise<void> {
  await until(
    'every node fine and heard by two witnesses',
    async () =>
      (await c.client.nodes()).every(
        (n) => n.status === 'ONLINE' && n.peer?.verdict === 'fine' && n.peer.witnesses.filter((w) => Date.parse(w.reported_at) - Date.parse(w.last_heard_at) < 2500).length >= 2,
      ),
    timeoutMs,
    250,
  );
}

/** killRounds kills `kills` nodes, `batch` at a time, and returns one sample per kill. */
export async function killRounds(c: Cluster, o: { label: string; nodes: string[]; batch: number; kills: number; witnessed: boolean; lostAfterS: number }): Promise<KillSample[]> {
  const jobs = new Map<string, string>();
  for (const n of o.nodes) jobs.set(n, await pinJob(c, n));
  const samples: KillSample[] = [];
  let next = 0;
  while (samples.length < o.kills) {
    if (o.witnessed) await untilWitnessed(c);
    const victims: string[] = [];
    for (let i = 0; i < Math.min(o.batch, o.kills - samples.length); i++) victims.push(o.nodes[next++ % o.nodes.length]);
    const killedAt = Date.now();
    await Promise.all(victims.map((v) => c.nodes.get(v)!.kill()));
    const ended = await Promise.all(
      victims.map((v) =>
        until(
          `${v}'s attempt LOST`,
          async () => {
            const d: JobDetailJson = await c.client.job(jobs.get(v)!);
            return d.attempts[0]?.state === 'LOST' ? d : null;
          },
          (o.lostAfterS + 60) * 1000,
          250,
        ),
      ),
    );
    for (const [i, v] of victims.entries()) {
      const d = ended[i];
      const at = d.history.find((h) => h.attempt === 1 && h.to === 'LOST')!.at;
      const s: KillSample = { node: v, job: d.id, lost_s: (Date.parse(at) - killedAt) / 1000, reason: d.attempts[0].reason ?? null };
      samples.push(s);
      say(`  ${o.label} kill ${samples.length}/${o.kills}: ${v} → LOST ${s.lost_s.toFixed(1)} s (${(s.reason ?? '').slice(0, 90)})`);
      await c.client.cancel(d.id).catch(() => undefined);
    }
    // Back, each with a fresh job of its own, before the next batch.
    await Promise.all(victims.map((v) => c.nodes.get(v)!.revive()));
    for (const v of victims) jobs.set(v, await pinJob(c, v));
  }
  for (const j of jobs.values()) await c.client.cancel(j).catch(() => undefined);
  return samples;
}

export interface OutageResult {
  seconds: number;
  jobs: number;
  /** Attempts that ended other than SUCCEEDED, and jobs that took a second attempt. */
  attempts_lost: number;
  second_attempts: number;
  /** Nodes seen declared dead: must be 0. */
  declared_dead: number;
  /** Verdicts other than fine seen in `gpuctl nodes` (sampled every second through the outage and after). */
  verdicts_seen: string[];
  job_states: { job: string; state: string; attempts: string[] }[];
}

/** outage stops Temporal, PostgreSQL and the control worker for `seconds` with a job of `seconds + 40` s on every node, and counts what was lost. */
export async function outage(c: Cluster, nodes: string[], seconds: number): Promise<OutageResult> {
  await untilWitnessed(c);
  const jobs: string[] = [];
  for (const n of nodes) {
    const j = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { slot: n }, command: `sleep ${seconds + 40}` });
    jobs.push(j.id);
  }
  for (const j of jobs) await c.client.waitFor(j, ['RUNNING'], 120_000);
  const verdicts = new Set<string>();
  const look = async () => {
    for (const n of await c.client.nodes().catch(() => [])) if (n.peer?.verdict && n.peer.verdict !== 'fine') verdicts.add(`${n.id}: ${n.peer.verdict} (${n.peer.reason ?? ''})`);
  };
  const watcher = setInterval(() => void look(), 1000);
  const pids = [c.temporal!.server.child.pid!, c.control.child!.pid!];
  say(`  outage: Temporal, PostgreSQL and the control worker stopped (SIGSTOP) for ${seconds} s`);
  for (const p of pids) process.kill(p, 'SIGSTOP');
  c.postgres!.signalAll('SIGSTOP');
  try {
    await new Promise((r) => setTimeout(r, seconds * 1000));
  } finally {
    c.postgres!.signalAll('SIGCONT');
    for (const p of pids) process.kill(p, 'SIGCONT');
  }
  say('  outage: over; waiting for the jobs to end');
  const done = [];
  for (const j of jobs) done.push(await c.client.waitFor(j, undefined, 240_000));
  clearInterval(watcher);
  await look();
  const states = done.map((d) => ({ job: d.id, state: d.state, attempts: d.attempts.map((a) => a.state) }));
  return {
    seconds,
    jobs: jobs.length,
    attempts_lost: states.flatMap((s) => s.attempts).filter((a) => a !== 'SUCCEEDED').length,
    second_attempts: states.filter((s) => s.attempts.length > 1).length,
    declared_dead: new Set([...verdicts].filter((v) => /^[^:]+: dead /.test(v)).map((v) => v.split(':')[0])).size,
    verdicts_seen: [...verdicts],
    job_states: states,
  };
}
