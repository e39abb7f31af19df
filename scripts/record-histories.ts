/**
 * Records the Temporal histories that test/replay.test.ts replays against the current workflow
 * code, one per workflow kind and shape, into test/histories/<kind>-<shape>.json.
 *
 *   node --import tsx scripts/record-histories.ts [--suffix <change-id>] [--overwrite] [--only main|lost|gang|ops|sweep]
 *
 * It never replaces a recorded history unasked: it writes only the files that are missing;
 * --suffix writes <kind>-<shape>-<change-id>.json beside the old files (new code behind a
 * `patched('<change-id>')`), and --overwrite replaces them.
 * Every history comes from the real system: a throwaway PostgreSQL, a Temporal dev server, and
 * real `gpuctl control-worker`, `api` and `agent` processes driven through the API client.
 * Read test/histories/README.md before re-recording an existing file.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { temporalBinary } from '../temporal/dev-server.ts';
import { connectClient } from '../temporal/setup.ts';
import { jobWorkflowId, nodeWorkflowId, SCHEDULER_WORKFLOW_ID, webhookWorkflowId } from '../workflows/names.ts';
import { startCluster, type SharedServices } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';
import { SWEEP_SHAPES, sweepScenarios } from './record-sweep-histories.ts';

const { values: args } = parseArgs({ options: { suffix: { type: 'string' }, overwrite: { type: 'boolean', default: false }, only: { type: 'string' } }, strict: true });
const outDir = fileURLToPath(new URL('../test/histories/', import.meta.url));
const fileOf = (name: string) => path.join(outDir, `${name}${args.suffix ? `-${args.suffix}` : ''}.json`);
const SHAPES = [
  'job-succeeded',
  'job-queued-then-dispatched',
  'job-failed-then-retried-run1',
  'job-failed-then-retried-run2',
  'job-cancelled-while-running',
  'job-agent-restarted-reattached',
  'job-terminated-while-running',
  'settle-terminated-job',
  'scheduler-running',
  'job-lost-then-requeued-run1',
  'job-lost-then-requeued-run2',
  'node-online',
  'node-offline-then-online',
  'job-gang-succeeded',
  'job-gang-member-failed',
  'job-stalled-killed',
  'webhook-delivered',
  ...SWEEP_SHAPES,
];
const say = (s: string) => process.stdout.write(`${s}\n`);
const written: { name: string; events: number; bytes: number }[] = [];

const { History } = proto.temporal.api.history.v1;

/**
 * Writes one run's history as `History.toJSON()` (test/replay.test.ts reads it back with
 * `History.fromObject`), after checking that it reads back to the very same bytes.
 */
async function record(client: Client, name: string, workflowId: string, runId?: string): Promise<void> {
  if (!SHAPES.includes(name)) throw new Error(`${name} is missing from SHAPES`);
  const file = fileOf(name);
  if (fs.existsSync(file) && !args.overwrite) {
    say(`  kept test/histories/${path.basename(file)}: it exists (--overwrite replaces it; see test/histories/README.md)`);
    return;
  }
  const history = History.create(await client.workflow.getHandle(workflowId, runId).fetchHistory());
  // One event per line: small, and a diff shows which events changed.
  const json = history.toJSON() as { events: unknown[] };
  const text = `{"events": [\n${json.events.map((e) => JSON.stringify(e)).join(',\n')}\n]}\n`;
  const reread = History.fromObject(JSON.parse(text) as Record<string, unknown>);
  if (!Buffer.from(History.encode(reread).finish()).equals(Buffer.from(History.encode(history).finish()))) throw new Error(`${name}: the JSON does not read back to the same history`);
  fs.writeFileSync(file, text);
  const bytes = Buffer.byteLength(text);
  written.push({ name: path.basename(file), events: json.events.length, bytes });
  say(`  wrote test/histories/${path.basename(file)}: ${json.events.length} events, ${bytes} bytes`);
}

/** Waits until the run has closed (completed, continued as new, terminated…); returns its status. */
async function closed(client: Client, workflowId: string, runId?: string, timeoutMs = 60_000): Promise<string> {
  const handle = client.workflow.getHandle(workflowId, runId);
  return until(`${workflowId} closed`, async () => {
    const d = await handle.describe();
    return d.status.name === 'RUNNING' ? null : d.status.name;
  }, timeoutMs, 250);
}

/** The run ids of a continue-as-new chain, oldest first, from its latest run's started events. */
async function chain(client: Client, workflowId: string): Promise<string[]> {
  const ids: string[] = [];
  let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  while (runId) {
    ids.unshift(runId);
    const h = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runId = h.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return ids;
}

/** The latest run's workflow type (a job's id also names its settle workflow). */
async function latestType(client: Client, workflowId: string): Promise<{ type: string; runId: string; status: string }> {
  const d = await client.workflow.getHandle(workflowId).describe();
  return { type: d.type, runId: d.runId, status: d.status.name };
}

/** Jobs that succeed, fail and are retried, are cancelled, re-attach, and are terminated in Temporal. */
async function mainScenarios(shared: SharedServices): Promise<void> {
  say('cluster "replay": heartbeat timeout 5 s, lost-after 30 s, retry retention 10 s');
  const c = await startCluster('replay', { heartbeatTimeoutS: 5, lostAfterS: 30, retryRetentionS: 10, agents: [{ nodeId: 'r1', gpus: 1 }] }, shared);
  const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
  try {
    say('job that succeeds');
    const ok = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    expectState(await c.client.waitFor(ok.id, undefined, 60_000), 'SUCCEEDED');
    await closed(t.client, jobWorkflowId(ok.id));
    await record(t.client, 'job-succeeded', jobWorkflowId(ok.id));

    say('job that waits in the queue behind a running one and is dispatched when its card is freed');
    const first = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 2' });
    await c.client.waitFor(first.id, ['RUNNING'], 60_000);
    const behind = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    expectState(await c.client.waitFor(behind.id, undefined, 60_000), 'SUCCEEDED');
    expectState(await c.client.waitFor(first.id, undefined, 60_000), 'SUCCEEDED');
    await closed(t.client, jobWorkflowId(behind.id));
    await record(t.client, 'job-queued-then-dispatched', jobWorkflowId(behind.id));

    say('job that fails, then is retried (retryJob update, continue-as-new) and succeeds as attempt 2');
    const bad = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'exit 1' });
    expectState(await c.client.waitFor(bad.id, undefined, 60_000), 'FAILED');
    await c.client.retry(bad.id, { command: 'true' });
    const retried = await c.client.waitFor(bad.id, undefined, 60_000);
    expectState(retried, 'SUCCEEDED', 2);
    await recordChain(t.client, 'job-failed-then-retried', jobWorkflowId(bad.id));

    say('job cancelled while RUNNING (its workflow completes after the retry retention)');
    const long = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 60' });
    await c.client.waitFor(long.id, ['RUNNING'], 60_000);
    await c.client.cancel(long.id, 'recording a history');
    expectState(await c.client.waitFor(long.id, undefined, 60_000), 'CANCELLED');
    await closed(t.client, jobWorkflowId(long.id));
    await record(t.client, 'job-cancelled-while-running', jobWorkflowId(long.id));

    say('job whose agent is SIGKILLed and restarted: the agent re-attaches, the job succeeds as attempt 1');
    const ticking = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo tick $i; sleep 1; done' });
    const running = await c.client.waitFor(ticking.id, ['RUNNING'], 60_000);
    const logPath = running.attempts[0].log_path!;
    await until('ticking', () => fs.existsSync(logPath) && fs.readFileSync(logPath, 'utf8').includes('tick 2'), 30_000);
    await c.agents.get('r1')!.kill('SIGKILL');
    const agent = await c.addAgent({ nodeId: 'r1', gpus: 1 });
    if (!agent.output.includes('re-attached')) throw new Error(`agent r1 did not re-attach:\n${agent.output}`);
    const reattached = await c.client.waitFor(ticking.id, undefined, 90_000);
    expectState(reattached, 'SUCCEEDED', 1);
    await closed(t.client, jobWorkflowId(ticking.id));
    await record(t.client, 'job-agent-restarted-reattached', jobWorkflowId(ticking.id));

    say('job terminated in Temporal while RUNNING: the reconciler settles it with settleJobWorkflow');
    const stuck = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 60' });
    await c.client.waitFor(stuck.id, ['RUNNING'], 60_000);
    const jobRun = (await latestType(t.client, jobWorkflowId(stuck.id))).runId;
    execFileSync(temporalBinary(), ['workflow', 'terminate', '--workflow-id', jobWorkflowId(stuck.id), '--reason', 'recording a history', '--address', c.env.TEMPORAL_ADDRESS!, '--namespace', c.namespace], { stdio: 'pipe' });
    const settled = await c.client.waitFor(stuck.id, undefined, 90_000);
    expectState(settled, 'FAILED');
    const settle = await until('settle workflow closed', async () => {
      const l = await latestType(t.client, jobWorkflowId(stuck.id));
      return l.type === 'settleJobWorkflow' && l.status !== 'RUNNING' ? l : null;
    }, 60_000, 250);
    // The terminated run is a job workflow cut off mid-attempt: the shape a deploy meets most.
    await record(t.client, 'job-terminated-while-running', jobWorkflowId(stuck.id), jobRun);
    await record(t.client, 'settle-terminated-job', jobWorkflowId(stuck.id), settle.runId);

    // The scheduler and node workflows run forever: a partial history replays all the same.
    await record(t.client, 'scheduler-running', SCHEDULER_WORKFLOW_ID);
  } finally {
    await t.close();
    await c.stop();
  }
}

/** An agent SIGKILLed mid-attempt: missed heartbeat, watchJob, LOST at lost-after, attempt 2 elsewhere. */
async function lostScenario(shared: SharedServices): Promise<void> {
  say('cluster "replay-lost": heartbeat timeout 2 s, lost-after 8 s, two nodes');
  const c = await startCluster('replay-lost', { heartbeatTimeoutS: 2, lostAfterS: 8, agents: [{ nodeId: 'l1', gpus: 1 }, { nodeId: 'l2', gpus: 1 }] }, shared);
  const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
  try {
    say('job whose agent is SIGKILLed: LOST, re-queued (continue-as-new) and succeeds as attempt 2 on the other node');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 4' });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 60_000);
    const victim = running.node_id!;
    const survivor = victim === 'l1' ? 'l2' : 'l1';
    await c.agents.get(victim)!.kill('SIGKILL');
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expectState(done, 'SUCCEEDED', 2);
    await recordChain(t.client, 'job-lost-then-requeued', jobWorkflowId(job.id));

    say('node workflows: one that stayed up, one whose agent was killed and came back');
    await c.addAgent({ nodeId: victim, gpus: 1 });
    await record(t.client, 'node-online', nodeWorkflowId(survivor));
    await record(t.client, 'node-offline-then-online', nodeWorkflowId(victim));
  } finally {
    await t.close();
    await c.stop();
  }
}

/** Gangs: a two-node job that succeeds, and one whose rank 1 exits 1 while rank 0 runs (rank 0 is stopped). */
async function gangScenario(shared: SharedServices): Promise<void> {
  say('cluster "replay-gang": two nodes');
  const c = await startCluster('replay-gang', { heartbeatTimeoutS: 5, lostAfterS: 30, retryRetentionS: 5, agents: [{ nodeId: 'k1', gpus: 1 }, { nodeId: 'k2', gpus: 1 }] }, shared);
  const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
  try {
    say('two-node gang that succeeds');
    const ok = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: 'sleep 1' });
    expectState(await c.client.waitFor(ok.id, undefined, 60_000), 'SUCCEEDED');
    await closed(t.client, jobWorkflowId(ok.id));
    await record(t.client, 'job-gang-succeeded', jobWorkflowId(ok.id));

    say('two-node gang whose rank 1 exits 1: FAILED, rank 0 stopped (its workflow completes after the retry retention)');
    const bad = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: 'if [ "$NODE_RANK" = 1 ]; then sleep 1; exit 1; fi; sleep 60' });
    expectState(await c.client.waitFor(bad.id, undefined, 60_000), 'FAILED');
    await closed(t.client, jobWorkflowId(bad.id));
    await record(t.client, 'job-gang-member-failed', jobWorkflowId(bad.id));
  } finally {
    await t.close();
    await c.stop();
  }
}

/** Operations: a job killed as stalled (a preemption that fails it), and a webhook's delivery workflow after one delivery. */
async function opsScenario(shared: SharedServices): Promise<void> {
  say('cluster "replay-ops": one node reporting telemetry every second, webhooks to loopback');
  const c = await startCluster('replay-ops', { heartbeatTimeoutS: 5, lostAfterS: 30, retryRetentionS: 5, agents: [{ nodeId: 'o1', gpus: 1, env: { GPUPLANE_TELEMETRY_S: '1' } }], env: { GPUPLANE_WEBHOOK_ALLOW_PRIVATE: 'loopback' } }, shared);
  const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
  const http = await import('node:http');
  let got = 0;
  const rx = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      got++;
      res.end('ok');
    });
  });
  await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
  try {
    const port = (rx.address() as { port: number }).port;
    const hook = await c.client.request<{ id: string }>('POST', '/webhooks', { url: `http://127.0.0.1:${port}/hook`, events: ['job.failed'] });
    say('job that sleeps silently with --stall-after 2s --on-stall kill: FAILED "stalled", its webhook delivered');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, stall_after_s: 2, on_stall: 'kill', preempt_grace_s: 1, command: 'sleep 120' });
    expectState(await c.client.waitFor(job.id, undefined, 60_000), 'FAILED', 1);
    await until('the delivery', async () => got >= 1 && (await c.client.request<{ webhooks: { id: string; backlog: number }[] }>('GET', '/webhooks')).webhooks.find((w) => w.id === hook.id)?.backlog === 0, 30_000);
    await closed(t.client, jobWorkflowId(job.id));
    await record(t.client, 'job-stalled-killed', jobWorkflowId(job.id));
    // It never ends while the webhook exists: a partial history, as the scheduler's.
    await record(t.client, 'webhook-delivered', webhookWorkflowId(hook.id));
  } finally {
    rx.close();
    await t.close();
    await c.stop();
  }
}

function expectState(job: { id: string; state: string; attempt: number; reason: string | null }, state: string, attempt?: number): void {
  if (job.state !== state || (attempt !== undefined && job.attempt !== attempt)) {
    throw new Error(`job ${job.id}: expected ${state}${attempt ? ` as attempt ${attempt}` : ''}, got ${job.state} attempt ${job.attempt} (${job.reason ?? ''})`);
  }
}

/** A job whose first run continued as new into a second: both runs, once the chain has closed. */
async function recordChain(client: Client, name: string, workflowId: string): Promise<void> {
  await closed(client, workflowId);
  const [first, second] = await chain(client, workflowId);
  await record(client, `${name}-run1`, workflowId, first);
  await record(client, `${name}-run2`, workflowId, second);
}

async function main(): Promise<void> {
  const shared = await startSharedServices('record');
  try {
    fs.mkdirSync(outDir, { recursive: true });
    if (!args.only || args.only === 'main') await mainScenarios(shared);
    if (!args.only || args.only === 'lost') await lostScenario(shared);
    if (!args.only || args.only === 'gang') await gangScenario(shared);
    if (!args.only || args.only === 'ops') await opsScenario(shared);
    if (!args.only || args.only === 'sweep') await sweepScenarios(shared, { record, closed, chain });
    const total = written.reduce((n, w) => n + w.bytes, 0);
    say(`\n${written.length} histories written, ${total} bytes:`);
    for (const w of written) say(`  ${w.name.padEnd(42)} ${String(w.events).padStart(4)} events ${String(w.bytes).padStart(8)} bytes`);
  } finally {
    await shared.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
