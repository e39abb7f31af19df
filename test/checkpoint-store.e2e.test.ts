import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
    c = await startCluster('ckptstore', { isolate: { subnet: SUBNET }, env: storage, lostAfterS: 8, agents: ['cs-a', 'cs-b'].map((nodeId) => ({ nodeId, gpus: 1, env: agentEnv })) });
    store = await openStore(parseStorage('s3://ckpts/plane'), { home: tmp, env: s3.env() });
  });
  afterAll(async () => {
    await store?.close();
    await c?.stop();
    await s3?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

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
    for (const k of ckpts) {
      const key = `checkpoints/${k.run_id}/${k.fingerprint.replace('sha256:', '')}.tar`;
      const head = await store.head(key);
      expect(head?.size, key).toBe(k.stored_bytes);
      // Unpacked anywhere, the copy is the registered checkpoint: same fingerprint.
      const out = path.join(tmp, k.id);
      fs.mkdirSync(out);
      await store.getToFile(key, path.join(tmp, `${k.id}.tar`));
      execFileSync('tar', ['-xf', path.join(tmp, `${k.id}.tar`), '-C', out]);
      const unpacked = path.join(out, path.basename(k.uri));
      expect(await contentHash(unpacked, snapshot(unpacked)!), k.uri).toBe(k.fingerprint);
    }
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
    });
    const first = await until(
      'a stored checkpoint',
      async () => (await c.client.request<{ checkpoints: CheckpointJson[] }>('GET', '/checkpoints?project=store-lost')).checkpoints.find((k) => k.storage === 'stored') ?? null,
      60_000,
    );
    const victim = (await c.client.job(job.id)).node_id!;
    await c.nodes.get(victim)!.kill();
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts[0].state).toBe('LOST');
    expect(done.attempt).toBe(2);
    expect(done.node_id).not.toBe(victim);
    // Attempt 2 was told a copy fetched into its node's cache, and went on after it.
    const events = (await c.client.request<{ events: { kind: string; attempt: number | null; message: string }[] }>('GET', `/jobs/${job.id}/events`)).events;
    const fetched = events.filter((e) => e.kind === 'checkpoint.fetched' && e.attempt === 2);
    expect(fetched.map((e) => e.message)).toEqual([expect.stringMatching(/^resume point ckpt-\S+ fetched from the store into \/var\/tmp\/gpuplane-checkpoint-cache\/\S+ \(\d+ bytes in [\d.]+ s\)$/)]);
    const resumedFrom = /resume point (\S+) fetched/.exec(fetched[0].message)![1];
    const all = (await c.client.request<{ checkpoints: (CheckpointJson & { step: number; attempt: number })[] }>('GET', '/checkpoints?project=store-lost')).checkpoints;
    const point = all.find((k) => k.id === resumedFrom)!;
    expect(point.storage).toBe('stored');
    expect(point.step).toBeGreaterThanOrEqual(first.step ?? 0);
    const second = all.filter((k) => k.attempt === 2);
    expect(second.length).toBeGreaterThan(0);
    for (const k of second) expect(k.step).toBeGreaterThan(point.step);

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
  });
});
