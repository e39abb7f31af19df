/**
 * bench/idle: what idle nodes and a running job cost the Temporal server.
 *
 *   npm run bench:idle [-- --nodes 1000 --per-process 100 --window 60]
 *
 * A Temporal dev server of its own (with its Prometheus endpoint), a throwaway PostgreSQL, the
 * control worker and `--nodes` fake agents, `--per-process` of them sharing one Node process
 * (each agent its own Temporal worker on its own task queue, holding its node's lease). Once
 * every node is ONLINE and the plane has settled, it counts the server's requests by operation
 * and its CPU over `--window` seconds; then it runs one `sleep` job on an otherwise idle
 * cluster and counts what that job adds per minute. The server's `service_requests` counter is
 * what a Temporal cluster (or Temporal Cloud's actions) pays for; the frontend's count is taken, the
 * API calls clients make.
 *
 * Windows are a minute by default: an idle agent's long poll expires after a minute
 * (`matching.longPollExpirationInterval`) and is opened again, and agents started together do
 * so together, so a window of whole minutes sees the same re-polls whatever the phase.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { GpuplaneClient } from '../cli/client.ts';
import { createLogger } from '../runtime/logger.ts';
import { openDatabase } from '../db/client.ts';
import { startApiServer } from '../api/server.ts';
import { startDevServer } from '../temporal/dev-server.ts';
import { frontendRequests } from '../temporal/server-metrics.ts';
import { connectClient, ensureNamespace } from '../temporal/setup.ts';
import { connectWorker } from '../temporal/worker-runtime.ts';
import { startControlWorker } from '../workers/control/worker.ts';
import { createToken } from '../api/auth/token-store.ts';
import { createDatabase, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '200' },
    'per-process': { type: 'string', default: '100' },
    window: { type: 'string', default: '60' },
    'heartbeat-timeout': { type: 'string', default: '10' },
    // How long every node may take to come up before the bench gives up.
    'start-timeout': { type: 'string', default: '1200' },
  },
  strict: true,
});
const NODES = Number(values.nodes);
const PER_PROCESS = Number(values['per-process']);
const START_TIMEOUT_MS = Number(values['start-timeout']) * 1000;
const WINDOW_S = Number(values.window);
const HB_MS = Number(values['heartbeat-timeout']) * 1000;
const say = (s: string) => process.stdout.write(`${s}\n`);

/** CPU seconds a process has used (user + system), from /proc. */
function cpuSeconds(pid: number): number {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function window(metricsUrl: string, pid: number, seconds: number) {
  const r0 = await frontendRequests(metricsUrl);
  const c0 = cpuSeconds(pid);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const r1 = await frontendRequests(metricsUrl);
  const cpu = (cpuSeconds(pid) - c0) / seconds;
  const byOp = [...r1].map(([op, n]) => [op, (n - (r0.get(op) ?? 0)) / seconds] as const).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  return { perSecond: byOp.reduce((s, [, n]) => s + n, 0), byOp, cpu };
}

async function main() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-idle-'));
  const metricsPort = await freePort();
  // Every node holds one long poll on its own task queue: past about 1,100 nodes a namespace
  // needs more than the frontend's default 1,200 concurrent polls (as temporal/dynamicconfig/gpuplane.yaml sets).
  const temporal = await startDevServer({ dbFile: path.join(scratch, 'temporal.db'), port: await freePort(), uiPort: null, metricsPort, logFile: path.join(scratch, 'temporal.log'), dynamicConfig: { 'frontend.namespaceCount': 10000 } });
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  const pgc = await startThrowawayCluster(await freePort());
  const hostProcs: ChildProcess[] = [];
  try {
    await createDatabase(pgc.url('postgres'), 'idle');
    const database = await openDatabase({ url: pgc.url('idle'), poolSize: 10 });
    await ensureNamespace(temporal.address, 'idle');
    const t = await connectClient(temporal.address, 'idle');
    const connection = await connectWorker(temporal.address, createLogger('warn'));
    const timeouts = { heartbeatTimeoutMs: HB_MS, lostAfterMs: Math.max(60_000, HB_MS * 6) };
    const control = await startControlWorker({ db: database.db, client: t.client, connection, namespace: 'idle', backfillHoldMs: 300_000, timeouts });
    const api = await startApiServer({ db: database.db, client: t.client, timeouts, auth: null }, '127.0.0.1', 0);
    const client = new GpuplaneClient(api.url);
    const hosts = Math.ceil(NODES / PER_PROCESS);
    say(`bench/idle: ${NODES} fake nodes × 8 cards, ${`${Math.min(PER_PROCESS, NODES)} agents a process in ${hosts} process${hosts === 1 ? '' : 'es'}`}, heartbeat timeout ${HB_MS / 1000} s; ${os.cpus().length} cores`);
    const tokens: Record<string, string> = {};
    for (let i = 0; i < NODES; i++) {
      // Only a node with a node token is taken into the pool.
      tokens[`n${i}`] = (await createToken(database.db, { name: `n${i}`, role: 'node', projects: [], nodeId: `n${i}` })).token;
    }
    const t0 = Date.now();
    {
      const tokensFile = path.join(scratch, 'node-tokens.json');
      fs.writeFileSync(tokensFile, JSON.stringify(tokens), { mode: 0o600 });
      for (let h = 0; h < hosts; h++) {
        const from = h * PER_PROCESS;
        const count = Math.min(PER_PROCESS, NODES - from);
        const argv = ['--import', 'tsx', path.join(import.meta.dirname, 'idle-agents.ts'), '--from', String(from), '--count', String(count), '--temporal', temporal.address, '--namespace', 'idle', '--api', api.url, '--tokens', tokensFile, '--scratch', scratch, '--heartbeat-timeout-ms', String(HB_MS), '--lost-after-ms', String(timeouts.lostAfterMs)];
        const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
        hostProcs.push(child);
        // Started one after another: bringing up many workers at once only makes them all slow.
        await new Promise<void>((resolve, reject) => {
          child.stdout.on('data', (d: Buffer) => {
            if (d.toString().includes('ready')) resolve();
          });
          child.once('exit', (code) => reject(new Error(`agent host ${h} exited with ${code} before its agents were up`)));
        });
        say(`  agent host ${h + 1}/${hosts} up (${from + count} agents, ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
      }
    }
    for (;;) {
      const online = (await client.nodes()).filter((n) => n.status === 'ONLINE').length;
      if (online >= NODES) break;
      if (Date.now() - t0 > START_TIMEOUT_MS) throw new Error(`only ${online} of ${NODES} nodes ONLINE after ${START_TIMEOUT_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 500));
    }
    say(`  all ${NODES} nodes ONLINE after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    await new Promise((r) => setTimeout(r, 15_000));
    const idle = await window(metricsUrl, temporal.child.pid!, WINDOW_S);
    const top = idle.byOp.slice(0, 4).map(([op, n]) => `${op} ${n.toFixed(1)}/s`).join(', ');
    say(`idle, ${NODES} nodes: ${idle.perSecond.toFixed(1)} server requests/s (${(idle.perSecond / NODES).toFixed(3)} a node; ${top}), server CPU ${(idle.cpu * 100).toFixed(1)} % of a core`);
    say(`  extrapolated to 1,000 nodes: ${((idle.perSecond / NODES) * 1000).toFixed(0)} requests/s`);

    // One job running on the idle cluster: what it adds, per minute.
    const job = await client.submit({ type: 'CUSTOM', gpus: 1, command: ['sleep', String(WINDOW_S + 30)], working_dir: '/tmp' });
    await client.waitFor(job.id, ['RUNNING'], 60_000);
    await new Promise((r) => setTimeout(r, 5000));
    const busy = await window(metricsUrl, temporal.child.pid!, WINDOW_S);
    const idleOf = new Map(idle.byOp);
    const added = busy.byOp.map(([op, n]) => [op, (n - (idleOf.get(op) ?? 0)) * 60] as const).filter(([, n]) => Math.abs(n) >= 1).sort((a, b) => b[1] - a[1]);
    say(`one running job adds ${((busy.perSecond - idle.perSecond) * 60).toFixed(1)} server requests a minute (${added.slice(0, 4).map(([op, n]) => `${op} ${n >= 0 ? '+' : ''}${n.toFixed(0)}`).join(', ')})`);
    await client.cancel(job.id);
    await client.waitFor(job.id, undefined, 60_000);
    // The control: the same idle cluster once the job has ended (what the job added goes with it).
    await new Promise((r) => setTimeout(r, 5000));
    const after = await window(metricsUrl, temporal.child.pid!, WINDOW_S);
    say(`after the job ended: ${after.perSecond.toFixed(1)} server requests/s (${after.byOp.slice(0, 3).map(([op, n]) => `${op} ${n.toFixed(1)}/s`).join(', ')})`);
    await Promise.all(hostProcs.map((c) => new Promise((r) => {
      c.once('exit', r);
      c.kill('SIGTERM');
    })));

    await api.close();
    await control.shutdown();
    await connection.close();
    await t.close();
    await database.close();
  } finally {
    for (const c of hostProcs) if (c.exitCode === null) c.kill('SIGKILL');
    await temporal.stop();
    pgc.remove();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
