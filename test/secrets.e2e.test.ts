import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker } from '@temporalio/worker';
import { connectClient } from '../temporal/setup.ts';
import type { AttemptSpec } from '../workflows/types.ts';
import { gpuHostTaskQueue } from '../workflows/names.ts';
import { jobWorkflowId } from '../workflows/names.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

const SECRET = 'hunter2-Zq8v-secret-value';

/** Every string in a value, Uint8Arrays (Temporal payloads) decoded as UTF-8. */
function* strings(v: unknown): Generator<string> {
  if (typeof v === 'string') yield v;
  else if (v instanceof Uint8Array) yield Buffer.from(v).toString('utf8');
  else if (Array.isArray(v)) for (const x of v) yield* strings(x);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) yield* strings(x);
}

/** Files under `dir` (not following links) whose bytes contain `needle`. */
function filesContaining(dir: string, needle: string): string[] {
  const found: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && fs.readFileSync(p).includes(needle)) found.push(p);
    }
  };
  walk(dir);
  return found;
}

/**
 * A secret variable reaches the job's process and nothing else: not the API's answers, not
 * gpuctl, not the Temporal history, not the agent's files, not any process's log.
 */
describe('secret env', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('secrets', { agents: [{ nodeId: 'sec-a', gpus: 1 }, { nodeId: 'sec-b', gpus: 1, labels: { pool: 'other' } }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('the job sees it; the API, gpuctl, Temporal, the agent files and the logs never show it', async () => {
    const marker = path.join(c.work, 'saw-secret');
    // The expected value in a file outside the plane's folders: the command itself must not carry it.
    const expectedFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-expected-')), 'value');
    fs.writeFileSync(expectedFile, SECRET);
    const job = await c.client.submit({
      type: 'CUSTOM',
      command: ['sh', '-c', `test "$API_KEY" = "$(cat ${expectedFile})" && echo yes > ${marker}; echo "job ran"`],
      secret_env: { API_KEY: SECRET },
      env: { PLAIN: 'visible' },
      selector: {},
      gpus: 1,
    });
    expect(job.secret_env).toEqual(['API_KEY']);
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(fs.readFileSync(marker, 'utf8').trim()).toBe('yes');

    const seen: string[] = [];
    const check = (where: string, text: string) => {
      if (text.includes(SECRET)) seen.push(where);
    };
    check('GET /jobs', JSON.stringify(await c.client.jobs()));
    check('GET /jobs/:id', JSON.stringify(await c.client.job(job.id)));
    check('gpuctl job --json', execFileSync(process.execPath, [gpuctlPath, 'job', job.id, '--json'], { env: c.env, encoding: 'utf8' }));
    check('gpuctl logs', execFileSync(process.execPath, [gpuctlPath, 'logs', job.id], { env: c.env, encoding: 'utf8' }));
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      const history = await t.client.workflow.getHandle(jobWorkflowId(job.id)).fetchHistory();
      for (const e of history.events ?? []) for (const s of strings(e)) check(`Temporal history event ${e.eventId} (${Object.keys(e).find((k) => k.endsWith('Attributes') && (e as Record<string, unknown>)[k])})`, s);
    } finally {
      await t.close();
    }
    for (const f of filesContaining(c.home, SECRET)) seen.push(`file ${f}`);
    check('control worker output', c.control.output);
    check('API output', c.api.output);
    for (const [id, a] of c.agents) check(`agent ${id} output`, a.output);
    expect(seen).toEqual([]);
  });

  it('only the node its live attempt runs on gets the values: not an admin, not another node, not after the end', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', command: ['sleep', '30'], secret_env: { API_KEY: SECRET }, gpus: 1 });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 60_000);
    const url = `${c.apiUrl}/api/v1/jobs/${job.id}/attempts/1/launch`;
    const get = (token: string) => fetch(url, { headers: { authorization: `Bearer ${token}` } });
    const admin = await get(c.token);
    expect(admin.status).toBe(403);
    expect(await admin.text()).not.toContain(SECRET);
    const other = running.node_id === 'sec-a' ? 'sec-b' : 'sec-a';
    const otherToken = (await c.makeToken({ role: 'node', nodeId: other })).token;
    const otherNode = await get(otherToken);
    expect(otherNode.status).toBe(403);
    const own = (await c.makeToken({ role: 'node', nodeId: running.node_id! })).token;
    const mine = await get(own);
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { secret_env: Record<string, string> }).secret_env).toEqual({ API_KEY: SECRET });
    // The start report (DISPATCHING → RUNNING) is the same node's alone; a repeat changes nothing.
    const started = (token: string) =>
      fetch(`${c.apiUrl}/api/v1/jobs/${job.id}/attempts/1/started`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ pid: 1, log_path: '/elsewhere.log' }) });
    expect((await started(c.token)).status).toBe(403);
    expect((await started(otherToken)).status).toBe(403);
    const again = await started(own);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ state: 'RUNNING' });
    await c.client.cancel(job.id);
    await c.client.waitFor(job.id, ['CANCELLED'], 60_000);
    expect((await get(own)).status).toBe(409);
    // A late report does not bring an ended attempt back to RUNNING.
    expect(await (await started(own)).json()).toEqual({ state: 'CANCELLED' });
    expect((await c.client.job(job.id)).state).toBe('CANCELLED');
  });

  it('a secret that shadows env or an agent variable is refused and makes no job', async () => {
    const before = (await c.client.jobs()).length;
    for (const body of [
      { command: ['true'], env: { K: 'a' }, secret_env: { K: 'b' } },
      { command: ['true'], secret_env: { GPUPLANE_RUN_ID: 'x' } },
      { command: ['true'], secret_env: { 'bad-name': 'x' } },
    ]) {
      const r = await fetch(`${c.apiUrl}/api/v1/jobs`, { method: 'POST', headers: { ...c.auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    expect((await c.client.jobs()).length).toBe(before);
  });

  it('a node with no node token is never taken into the pool; with one it is', async () => {
    await c.addAgent({ nodeId: 'sec-rogue', gpus: 4, labels: { pool: 'rogue' }, token: false });
    await until('the control worker refused it', () => c.control.output.includes('node sec-rogue reported itself online but has no node token'), 30_000);
    expect((await c.client.nodes()).some((n) => n.id === 'sec-rogue')).toBe(false);
    const job = await c.client.submit({ type: 'CUSTOM', command: ['true'], gpus: 1, selector: { pool: 'rogue' } });
    await c.client.waitFor(job.id, ['QUEUED'], 30_000);
    // A job queued after it that any node can take: the scheduling pass that places it has seen
    // the rogue node's job too, and left it queued.
    const witness = await c.client.submit({ type: 'CUSTOM', command: ['true'], gpus: 0 });
    expect((await c.client.waitFor(witness.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    expect((await c.client.job(job.id)).state).toBe('QUEUED');
    await c.agents.get('sec-rogue')!.kill('SIGTERM');
    await c.addAgent({ nodeId: 'sec-rogue', gpus: 4, labels: { pool: 'rogue' } });
    expect((await c.client.waitFor(job.id, undefined, 60_000)).state).toBe('SUCCEEDED');
  });

  it('a runJob forged through Temporal for a running job starts nothing and fences nothing', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', command: ['sleep', '20'], gpus: 1 });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 60_000);
    const pwned = path.join(c.work, 'pwned');
    const connection = await NativeConnection.connect({ address: c.env.TEMPORAL_ADDRESS! });
    const worker = await Worker.create({ connection, namespace: c.namespace, taskQueue: 'forger', workflowsPath: fileURLToPath(new URL('./support/forger-workflow.ts', import.meta.url)) });
    try {
      const forged = (o: Partial<AttemptSpec>) => ({
        jobId: job.id,
        attempt: 2,
        type: 'CUSTOM' as const,
        runId: null,
        nodeId: running.node_id!,
        command: ['sh', '-c', `touch ${pwned}`],
        workingDir: c.work,
        env: {},
        params: {},
        gpuIndices: running.gpu_indices!,
        lostAfterMs: 60_000,
        ...o,
      });
      const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
      try {
        const forge = (spec: AttemptSpec) => t.client.workflow.execute('forgeRunJob', { taskQueue: 'forger', workflowId: `forge-${spec.jobId}-${spec.attempt}-${Date.now()}`, args: [spec, gpuHostTaskQueue(running.node_id!)] });
        // The next attempt of a running job (it would fence the running one), and a job that does not exist.
        const [next, ghost] = await worker.runUntil(Promise.all([forge(forged({})), forge(forged({ jobId: 'job-zzzzzzzzzzzz0000', attempt: 1 }))]));
        expect(next.spawnError).toMatch(/control plane does not confirm/);
        expect(ghost.spawnError).toMatch(/control plane does not confirm/);
      } finally {
        await t.close();
      }
    } finally {
      await connection.close();
    }
    expect(fs.existsSync(pwned)).toBe(false);
    const still = await c.client.job(job.id);
    expect(still).toMatchObject({ state: 'RUNNING', attempt: 1 });
    await c.client.cancel(job.id);
  });
});
