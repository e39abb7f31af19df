/**
 * bench/ddp-node-loss (issue 40, 1, by hand): real PyTorch DDP (examples/ddp, torchrun, gloo on
 * CPU) across a two-node job of a three-agent cluster; one member's machine dies whole (its agent
 * and its rank SIGKILLed together). Prints what the attempt became and what attempt 2 did. As root
 * each agent is an isolated node (runtime/isolated-nodes.ts: its own network and mount namespaces,
 * so MASTER_ADDR is rank 0's node's own address) and the kill is the node's (every process in it
 * at once); otherwise the agent and rank 1's process groups are SIGKILLed one after the other.
 *
 *   node --import tsx bench/ddp-node-loss.ts     (needs scripts/ddp-venv.sh: torch, several GB)
 *
 * Not part of npm test: torch is large. test/gang-peer-loss.e2e.test.ts holds the same case with
 * ranks that behave as gloo's do.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isolationRefusal } from '../runtime/isolated-nodes.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { startSharedServices } from '../test/support/services.ts';
import { runMain } from './run-main.ts';

const say = (s: string) => process.stdout.write(`${s}\n`);
const venv = execFileSync('bash', [path.join(import.meta.dirname, '../scripts/ddp-venv.sh')], { encoding: 'utf8' }).trim();
const train = path.resolve(import.meta.dirname, '../examples/ddp/train.py');

// Three agents on one machine: jobs run as the agents' own user (vitest.config.ts does the same).
process.env.GPUPLANE_JOB_USERS ??= 'agent';

async function main() {
  const services = await startSharedServices('ddp-loss');
  let c: Cluster | undefined;
  try {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-ddp-'));
    fs.chmodSync(dir, 0o777);
    // The working dir is the nodes' shared storage: rank 0's checkpoints there are what attempt 2 resumes from.
    const isolate = isolationRefusal() === null ? { subnet: 250, shared: [dir] } : undefined;
    say(isolate ? 'isolated nodes (root): each agent in its own network and mount namespaces' : `not isolated: ${isolationRefusal()}`);
    c = await startCluster('ddploss', { heartbeatTimeoutS: 4, isolate, agents: ['d1', 'd2', 'd3'].map((nodeId) => ({ nodeId, gpus: 1 })) }, services);
    // Long enough to be killed mid-run; attempt 2 runs the short default.
    const steps = '$([ "$GPUPLANE_ATTEMPT" = 1 ] && echo 200000 || echo 30)';
    const job = await c.client.submit({ type: 'TRAIN', nodes: 2, gpus_per_node: 1, working_dir: dir, watch_dir: 'ckpts', command: `exec ${venv}/bin/torchrun ${train} --steps ${steps} --every 50000` });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 120_000);
    const [survivor, victim] = running.members!.map((m) => m.node_id);
    say(`job ${job.id} RUNNING on ${survivor} (rank 0) and ${victim} (rank 1)`);
    await new Promise((r) => setTimeout(r, 8000)); // torchrun up, the process group formed, training
    const node = c.nodes.get(victim);
    if (node) {
      say(`killing ${victim} whole: every process in ${node.netns}`);
      const at = Date.now();
      await node.kill();
      await report(c, job.id, at);
      return;
    }
    const pids = execFileSync('pgrep', ['-f', `${train}`], { encoding: 'utf8' }).trim().split('\n').map(Number);
    const rank1 = pids.filter((p) => fs.readFileSync(`/proc/${p}/environ`, 'utf8').includes('NODE_RANK=1'));
    const groups = new Set(rank1.map((p) => Number(fs.readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[2])));
    say(`killing ${victim} whole: its agent and process groups ${[...groups].join(', ')} (rank 1's torchrun and worker)`);
    const at = Date.now();
    await c.agents.get(victim)!.kill('SIGKILL');
    for (const g of groups) process.kill(-g, 'SIGKILL');
    await report(c, job.id, at);
  } finally {
    await c?.stop();
    await services.stop();
  }
}

/** What the job became once the node died at `at`, and the last lines rank 0 wrote in attempt 1 and the last attempt. */
async function report(c: Cluster, jobId: string, at: number): Promise<void> {
  const done = await c.client.waitFor(jobId, undefined, 300_000);
  say(`after ${((Date.now() - at) / 1000).toFixed(1)} s: job ${done.state}, attempt ${done.attempt}`);
  for (const a of done.attempts) say(`  attempt ${a.attempt}: ${a.state} on ${(a.members ?? []).map((m) => m.node_id).join(', ')}: ${a.reason ?? ''}`);
  const log = await (await fetch(`${c.apiUrl}/api/v1/jobs/${jobId}/logs?attempt=1&rank=0&stream=stderr`, { headers: c.client.authHeaders() })).text();
  say(`attempt 1 rank 0's stderr, last lines:\n${log.trim().split('\n').slice(-4).join('\n')}`);
  const log2 = await (await fetch(`${c.apiUrl}/api/v1/jobs/${jobId}/logs?attempt=${done.attempt}&rank=0&stream=stdout`, { headers: c.client.authHeaders() })).text();
  say(`attempt ${done.attempt} rank 0's stdout, last lines:\n${log2.trim().split('\n').slice(-2).join('\n')}`);
}

runMain(main);
