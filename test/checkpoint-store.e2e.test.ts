import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { contentHash, snapshot } from '../activities/gpu-host/fingerprint.ts';
import { openStore, parseStorage, type ObjectStore } from '../runtime/object-store.ts';
import { startS3Server, type S3Server } from '../runtime/s3-server.ts';
import { NODE_SCRATCH } from '../runtime/isolated-nodes.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { gpuctlIn } from './support/gpuctl-cli.ts';
import { jobUsersSkipReason } from './support/job-users.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';

const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces, which only root makes');
const SUBNET = 36;
const repo = path.resolve('.');

interface CheckpointJson {
  id: string;
  step?: number | null;
  run_id: string;
  uri: string;
  fingerprint: string;
  storage: string | null;
  storage_reason: string | null;
  stored_bytes: number | null;
  deleted_at: string | null;
}

/**
 * Checkpoints that survive their node (issue 44, first part): on a plane whose store is a real S3
 * server (versitygw), each checkpoint a job on an isolated node registers is packed as the job's
 * own user (a job uid: the node runs jobs as job users)
 * user and uploaded under checkpoints/<run>/<fingerprint>.tar; the checkpoint goes pending →
 * stored, and the stored tar unpacks to files whose fingerprint is the registered one.
 */
describe.skipIf(skip)("checkpoints stored in the plane's object store", () => {
  let s3: S3Server;
  let c: Cluster;
  let store: ObjectStore;
  const tmp = fs.mkdtempSync('/var/tmp/gpuplane-ckpt-store-');

  beforeAll(async () => {
    // On every address: the nodes reach it across their bridge (10.233.<subnet>.1), the API on this machine.
    s3 = await startS3Server({ dir: path.join(tmp, 's3'), host: '0.0.0.0', port: await freePort(), accessKeyId: 'ckpt-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['ckpts'] });
    // The bridge is made with the cluster: its address is the endpoint the plane's processes get.
    const storage = { ...s3.env(), GPUPLANE_S3_ENDPOINT: s3.endpoint.replace('127.0.0.1', `10.233.${SUBNET}.1`), GPUPLANE_STORAGE: 's3://ckpts/plane' };
    const agentEnv = { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300', GPUPLANE_JOB_USERS: '3800100-3800199' };
    c = await startCluster('ckptstore', { isolate: { subnet: SUBNET }, env: storage, lostAfterS: 8, agents: ['cs-a', 'cs-b', 'cs-c'].map((nodeId) => ({ nodeId, gpus: 1, env: agentEnv })) });
    store = await openStore(parseStorage('s3://ckpts/plane'), { home: tmp, env: s3.env() });
  });
  afterAll(async () => {
    await store?.close();
    await c?.stop();
    await s3?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** Each checkpoint's copy is in the bucket, its size as recorded, and unpacked anywhere it is the registered checkpoint: same fingerprint. */
  async function expectStoredCopies(ckpts: CheckpointJson[]): Promise<void> {
    for (const k of ckpts) {
      const key = `checkpoints/${k.run_id}/${k.fingerprint.replace('sha256:', '')}.tar`;
      const head = await store.head(key);
      expect(head?.size, key).toBe(k.stored_bytes);
      const out = path.join(tmp, k.id);
      fs.mkdirSync(out);
      await store.getToFile(key, path.join(tmp, `${k.id}.tar`));
      execFileSync('tar', ['-xf', path.join(tmp, `${k.id}.tar`), '-C', out]);
      const unpacked = path.join(out, path.basename(k.uri));
      expect(await contentHash(unpacked, snapshot(unpacked)!), k.uri).toBe(k.fingerprint);
    }
  }

  it('each checkpoint of a job on an isolated node ends stored, and its copy is the registered checkpoint', async () => {
    const work = path.join(c.work, 'train');
    // The job's user (a job uid of the node) writes its checkpoints there.
    fs.mkdirSync(work, { recursive: true });
    fs.chmodSync(work, 0o1777);
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'store',
      working_dir: work,
      watch_dir: 'ckpts',
      selector: { node: 'cs-a' },
      params: { chunk_sleep: 0.05, steps: 45, every: 15 },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
    });
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    const ckpts = await until(
      'every checkpoint stored',
      async () => {
        const k = (await c.client.request<{ checkpoints: CheckpointJson[] }>('GET', `/checkpoints?project=store`)).checkpoints;
        return k.length === 3 && k.every((x) => x.storage === 'stored') ? k : null;
      },
      60_000,
    );
    await expectStoredCopies(ckpts);
    // gpuctl checkpoint download: the stored files, unpacked and checked against the fingerprint; another project's token sees no such checkpoint.
    const env = { ...c.env, GPUPLANE_API_URL: c.apiUrl, GPUPLANE_TOKEN: c.token };
    const dl = path.join(tmp, 'downloaded');
    const got = await gpuctlIn(env, ['checkpoint', 'download', ckpts[0].id, dl, '--json']);
    expect(got.code, got.stderr).toBe(0);
    const said = JSON.parse(got.stdout) as { path: string; fingerprint: string };
    expect(said.fingerprint).toBe(ckpts[0].fingerprint);
    expect(await contentHash(said.path, snapshot(said.path)!)).toBe(ckpts[0].fingerprint);
    const other = await c.makeToken({ role: 'member', projects: ['elsewhere'] });
    const refused = await gpuctlIn({ ...env, GPUPLANE_TOKEN: other.token }, ['checkpoint', 'download', ckpts[0].id, path.join(tmp, 'refused')]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain(ckpts[0].id);
    expect(fs.existsSync(path.join(tmp, 'refused'))).toBe(false);
    // The time each upload took is an event of the attempt.
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${job.id}/events`)).events.filter((e) => e.kind === 'checkpoint.stored');
    expect(events.length).toBe(3);
    expect(events[0].message).toMatch(/^checkpoint .* stored as checkpoints\/run-.*\.tar \(\d+ bytes in [\d.]+ s\)$/);
  });

  // A node a test killed and could not revive (it failed midway): the next test needs it.
  let reviveAfter: string | null = null;
  beforeEach(async () => {
    if (reviveAfter) await c.nodes.get(reviveAfter)!.revive();
    reviveAfter = null;
  });

  it("a node killed whole: the job re-queued onto another node resumes from the stored checkpoint, which that node never had; an evaluation there reads the stored copy", async () => {
    // The working dir is the node's own scratch disk: nothing of it is on the other node.
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'store-lost',
      working_dir: `${NODE_SCRATCH}/train-lost`,
      watch_dir: 'ckpts',
      params: { chunk_sleep: 0.02, steps: 90, every: 15, step_sleep: 0.15 },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
      // Every other checkpoint of each attempt is evaluated by an EVALUATE child, on whichever node has a free card.
      eval_policy: { when: 'every', n: 2, command: [examplesPython(), path.join(repo, 'examples/eval_ckpt.py')] },
    });
    const first = await until(
      'a stored checkpoint',
      async () => (await c.client.request<{ checkpoints: CheckpointJson[] }>('GET', '/checkpoints?project=store-lost')).checkpoints.find((k) => k.storage === 'stored') ?? null,
      60_000,
    );
    const victim = (await c.client.job(job.id)).node_id!;
    await c.nodes.get(victim)!.kill();
    reviveAfter = victim;
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts[0].state).toBe('LOST');
    expect(done.attempt).toBe(2);
    expect(done.node_id).not.toBe(victim);
    // Attempt 2 was told a copy fetched into its node's cache (or already there: an evaluation of the same checkpoint on that node fetched it), and went on after it.
    const events = (await c.client.request<{ events: { kind: string; attempt: number | null; message: string }[] }>('GET', `/jobs/${job.id}/events`)).events;
    const fetched = events.filter((e) => e.kind === 'checkpoint.fetched' && e.attempt === 2);
    expect(fetched.map((e) => e.message)).toEqual([
      expect.stringMatching(/^resume point ckpt-\S+ (fetched from the store into \/var\/tmp\/gpuplane-checkpoint-cache\/\S+ \(\d+ bytes in [\d.]+ s\)|is in this node's cache: \/var\/tmp\/gpuplane-checkpoint-cache\/\S+)$/),
    ]);
    const resumedFrom = /resume point (\S+) (fetched|is in)/.exec(fetched[0].message)![1];
    const all = (await c.client.request<{ checkpoints: (CheckpointJson & { step: number; attempt: number })[] }>('GET', '/checkpoints?project=store-lost')).checkpoints;
    const point = all.find((k) => k.id === resumedFrom)!;
    expect(point.storage).toBe('stored');
    expect(point.step).toBeGreaterThanOrEqual(first.step ?? 0);
    const second = all.filter((k) => k.attempt === 2);
    expect(second.length).toBeGreaterThan(0);
    for (const k of second) expect(k.step).toBeGreaterThan(point.step);

    // Its children evaluate checkpoints of both attempts. Each one stored ran off the dead node on
    // the stored copy; one the dead node never stored cannot be evaluated anywhere. The best
    // checkpoint is the evaluated best, and it is stored.
    type Evaluation = { checkpoint_id: string; job_id: string; status: string; metrics: Record<string, number> | null };
    // Every 2nd checkpoint of each attempt's run, from its first.
    const wanted = [1, 2].reduce((n, at) => n + Math.ceil(all.filter((k) => k.attempt === at).length / 2), 0);
    const evaluated = await until(`its children's ${wanted} evaluations ended`, async () => {
      const e = (await Promise.all(all.map(async (k) => (await c.client.request<{ evaluations: Evaluation[] }>('GET', `/checkpoints/${k.id}/evaluations`)).evaluations))).flat();
      return e.length === wanted && e.every((x) => x.status !== 'pending' && x.status !== 'running') ? e : null;
    }, 120_000);
    const storedOnes = evaluated.filter((e) => all.find((k) => k.id === e.checkpoint_id)!.storage === 'stored');
    expect(new Set(storedOnes.map((e) => all.find((k) => k.id === e.checkpoint_id)!.attempt))).toEqual(new Set([1, 2]));
    for (const e of storedOnes) {
      expect(e.status, e.checkpoint_id).toBe('succeeded');
      const evJob = await c.client.job(e.job_id);
      expect(evJob.node_id).not.toBe(victim);
      const got = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${e.job_id}/events`)).events.filter((x) => x.kind === 'checkpoint.fetched');
      // Begun while its checkpoint's node was still storing it, it waited for the copy first.
      expect(got.map((x) => x.message).filter((m) => !m.startsWith(`checkpoint ${e.checkpoint_id} was still being stored by node `))).toEqual([
        expect.stringMatching(new RegExp(`^checkpoint ${e.checkpoint_id} (fetched from the store into|is in this node's cache:) `)),
      ]);
    }
    const lowest = evaluated.filter((e) => e.status === 'succeeded').reduce((a, b) => (a.metrics!['eval/loss'] <= b.metrics!['eval/loss'] ? a : b));
    const best = await c.client.request<{ checkpoint: CheckpointJson; fallback: boolean }>('GET', `/checkpoints/best?project=store-lost`);
    expect(best.fallback).toBe(false);
    expect(best.checkpoint.id).toBe(lowest.checkpoint_id);
    expect(best.checkpoint.storage).toBe('stored');

    // An evaluation of a checkpoint the dead node wrote, on the node that lives: it reads the stored copy.
    const survivor = done.node_id!;
    const ev = await c.client.request<{ id: string; job_id: string }>('POST', `/checkpoints/${first.id}/evaluations`, {
      command: [examplesPython(), path.join(repo, 'examples/eval_ckpt.py')],
      selector: { node: survivor },
    });
    const evJob = await c.client.waitFor(ev.job_id, undefined, 60_000);
    expect(evJob.state, evJob.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(evJob.node_id).toBe(survivor);
    const evEvents = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${ev.job_id}/events`)).events.filter((e) => e.kind === 'checkpoint.fetched');
    expect(evEvents.map((e) => e.message)).toEqual([expect.stringMatching(new RegExp(`^checkpoint ${first.id} (fetched from the store into|is in this node's cache:) `))]);
    const evaluation = (await c.client.request<{ evaluations: { status: string; metrics: Record<string, number> | null }[] }>('GET', `/checkpoints/${first.id}/evaluations`)).evaluations[0];
    expect(evaluation.status).toBe('succeeded');
    expect(evaluation.metrics).toHaveProperty(['eval/loss']);
    await c.nodes.get(victim)!.revive();
    reviveAfter = null;
  });

  it('the S3 server away for 30 s, the agent killed meanwhile: its uploads are taken up again, a retry waits for its pending resume point, and every checkpoint ends stored', async () => {
    const work = path.join(c.work, 'train-away');
    fs.mkdirSync(work, { recursive: true });
    fs.chmodSync(work, 0o1777);
    // Retention keeps each run's latest checkpoint (and its best): step 15 goes when step 30 registers, before it was ever stored.
    await c.client.request('PUT', '/projects/store-away/experiments/away/retention', { keep_best: 0, keep_latest: 1 });
    await s3.stop('SIGKILL');
    const away = Date.now();
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'store-away',
      experiment: 'away',
      working_dir: work,
      watch_dir: 'ckpts',
      selector: { node: 'cs-a' },
      // A second and a half between checkpoints: each is found while the attempt runs.
      params: { chunk_sleep: 0.05, steps: 45, every: 15, step_sleep: 0.1 },
      // Its first attempt fails once its training is done (exit 3), so that it can be retried.
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1', EXIT_WITH: '3' },
      command: ['sh', '-c', '"$0" "$1" --out ckpts && exit "$EXIT_WITH"', examplesPython(), path.join(repo, 'examples/train_ckpt.py')],
    });
    type Listed = CheckpointJson & { step: number; attempt: number };
    const list = async () => (await c.client.request<{ checkpoints: Listed[] }>('GET', '/checkpoints?project=store-away')).checkpoints;
    const first = await c.client.waitFor(job.id, undefined, 60_000);
    expect(first.state, first.attempts.at(-1)?.reason ?? '').toBe('FAILED');
    // Registered while the store is away: pending, their uploads waiting for it.
    // A failed attempt's checkpoints are those its watcher found while it ran (steps 15 and 30).
    const registered = await until('its two checkpoints registered, the first deleted by retention', async () => {
      const k = await list();
      return k.length === 2 && k.some((x) => x.deleted_at) ? k : null;
    }, 30_000);
    expect(registered.map((k) => [k.step, k.storage, k.storage_reason])).toEqual([
      [15, 'failed', 'retention deleted its files before they were stored'],
      [30, 'pending', null],
    ]);
    // The agent dies with those uploads in flight; the one that starts again (the store still away) takes them up.
    const agent = c.agents.get('cs-a')!;
    await agent.kill('SIGKILL');
    await agent.start();
    await until('cs-a online again', async () => (await c.client.request<{ status: string }>('GET', '/nodes/cs-a')).status === 'ONLINE', 30_000);
    // A retry on the same node: its resume point (step 30) is still pending on a node that is up, so its start waits for the copy.
    await c.client.request('POST', `/jobs/${job.id}/retry`, { params: { steps: '45' }, env: { EXIT_WITH: '0' } });
    await new Promise((r) => setTimeout(r, Math.max(0, away + 30_000 - Date.now())));
    await s3.start();
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempt).toBe(2);
    const events = (await c.client.request<{ events: { kind: string; attempt: number | null; message: string }[] }>('GET', `/jobs/${job.id}/events`)).events.filter((e) => e.kind === 'checkpoint.fetched' && e.attempt === 2);
    const last = registered.reduce((a, b) => (b.step > a.step ? b : a));
    expect(events.map((e) => e.message)).toEqual([
      expect.stringMatching(new RegExp(`^resume point ${last.id} was still being stored by node cs-a: its copy came after [\\d.]+ s$`)),
      expect.stringMatching(new RegExp(`^resume point ${last.id} fetched from the store into `)),
    ]);
    const stored = await until('the live checkpoints stored after the outage', async () => {
      const k = await list();
      return k.length === 3 && k.every((x) => x.storage === 'stored' || x.deleted_at) ? k : null;
    }, 60_000);
    // Attempt 2 went on from step 30: its one checkpoint is step 45.
    const kept = stored.filter((k) => !k.deleted_at);
    expect(kept.map((k) => [k.attempt, k.step]).sort((x, y) => x[1] - y[1])).toEqual([
      [1, 30],
      [2, 45],
    ]);
    await expectStoredCopies(kept);
    // The one retention deleted before it was stored is nowhere in the store, and cannot be downloaded.
    for (const k of stored.filter((x) => x.deleted_at)) {
      expect(await store.head(`checkpoints/${k.run_id}/${k.fingerprint.replace('sha256:', '')}.tar`), k.id).toBeNull();
      const refused = await fetch(`${c.apiUrl}/api/v1/checkpoints/${k.id}/download`, { headers: c.auth });
      expect(refused.status).toBe(409);
      expect(((await refused.json()) as { message: string }).message).toMatch(/retention deleted its files/);
    }
  }, 240_000);

  it("retention while the writer's node is dead: its stored copy leaves the store at once, its files when the node is back", async () => {
    // Its evaluations wait for cards held elsewhere, so that they end only once the writer is dead.
    const blockers = await Promise.all(['cs-b', 'cs-c'].map((node) => c.client.submit({ type: 'CUSTOM', gpus: 1, project: 'store-gone', selector: { node }, working_dir: '/tmp', command: ['sleep', '600'] })));
    for (const b of blockers) await until(`${b.id} running`, async () => (await c.client.job(b.id)).state === 'RUNNING', 30_000);
    // Each run keeps its latest checkpoint; one under evaluation stays until its evaluation ends.
    await c.client.request('PUT', '/projects/store-gone/experiments/gone/retention', { keep_best: 0, keep_latest: 1 });
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'store-gone',
      experiment: 'gone',
      working_dir: `${NODE_SCRATCH}/train-gone`,
      watch_dir: 'ckpts',
      params: { chunk_sleep: 0.02, steps: 60, every: 15, step_sleep: 0.3 },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
      eval_policy: { when: 'every', n: 1, command: [examplesPython(), path.join(repo, 'examples/eval_ckpt.py')] },
    });
    type Listed = CheckpointJson & { step: number; attempt: number };
    const list = async () => (await c.client.request<{ checkpoints: Listed[] }>('GET', '/checkpoints?project=store-gone')).checkpoints;
    const two = await until('two checkpoints stored', async () => {
      const k = (await list()).filter((x) => x.storage === 'stored');
      return k.length >= 2 ? k : null;
    }, 60_000);
    const victim = (await c.client.job(job.id)).node_id!;
    expect(victim).toBe('cs-a');
    await c.nodes.get(victim)!.kill();
    reviveAfter = victim;
    await until(`${victim} OFFLINE`, async () => (await c.client.request<{ status: string }>('GET', `/nodes/${victim}`)).status === 'OFFLINE', 30_000);
    const [k15] = two.sort((x, y) => x.step - y.step);
    expect(k15.deleted_at).toBeNull();
    const onVictim = path.join(c.nodes.get(victim)!.scratchDir, path.relative(NODE_SCRATCH, k15.uri));
    expect(fs.existsSync(onVictim), onVictim).toBe(true);
    // The cards free, its evaluations run elsewhere from the stored copies; each one's end lets its checkpoint go.
    for (const b of blockers) await c.client.request('POST', `/jobs/${b.id}/cancel`, {});
    const gone = await until(`checkpoint ${k15.id} let go`, async () => (await list()).find((k) => k.id === k15.id && k.deleted_at) ?? null, 60_000);
    // Its copy left the store at once, though its node is dead; its files are still on that node's disk.
    expect(gone.storage).toBe('stored');
    expect(await store.head(`checkpoints/${k15.run_id}/${k15.fingerprint.replace('sha256:', '')}.tar`)).toBeNull();
    expect(fs.existsSync(onVictim), onVictim).toBe(true);
    // Back, the node deletes them.
    await c.nodes.get(victim)!.revive();
    reviveAfter = null;
    await until(`${onVictim} deleted by its node`, async () => !fs.existsSync(onVictim), 60_000);
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts[0].state).toBe('LOST');
    // What retention keeps ends stored: the resume point of attempt 2 and each run's latest (the last
    // one's upload may still be under way as the job ends, and one the dead node had not finished is
    // taken up when it is back).
    const kept = await until('every kept checkpoint stored', async () => {
      const k = (await list()).filter((x) => !x.deleted_at);
      return k.length > 0 && k.every((x) => x.storage === 'stored') ? k : null;
    }, 60_000).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify((await list()).filter((x) => !x.deleted_at).map((x) => [x.id, x.attempt, x.step, x.storage]))}`);
    });
    expect(kept.length).toBeGreaterThan(0);
  }, 240_000);
});
