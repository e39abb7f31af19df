import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const skip = jobUsersSkipReason("jobs run as the agent's own user, nothing to steer");

interface EventJson {
  kind: string;
  message: string;
  data: Record<string, unknown> | null;
}
interface CheckpointJson {
  uri: string;
  fingerprint: string;
}

describe.skipIf(skip !== null)('a job that plants links and folders in its checkpoint folder (agent as root, job users)', () => {
  let c: Cluster;
  const tag = randomBytes(4).toString('hex');
  const base = `/tmp/gpuplane-hostile-${tag}`;
  const rootOnly = path.join(base, 'root-only');
  const beta = path.join(base, 'beta');
  let betaUid = 0;
  const files = (dir: string) => fs.readdirSync(dir).sort();

  beforeAll(async () => {
    c = await startCluster('hostile', { agents: [{ nodeId: 'hostile-node', gpus: 2, env: { GPUPLANE_JOB_USERS: '3100000-3100099', GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300' } }] });
    fs.mkdirSync(base, { mode: 0o755 });
    // Shared like /tmp (sticky): each job's user makes its own folder in it.
    fs.chmodSync(base, 0o1777);
    fs.mkdirSync(rootOnly, { mode: 0o700 });
    for (const i of [1, 2, 3]) fs.writeFileSync(path.join(rootOnly, `important_${i}.conf`), `root ${i}`);
    // Beta's private folder, made by beta's own job (its user, 0700).
    const made = await c.client.submit({ type: 'CUSTOM', project: 'beta', command: ['sh', '-c', 'mkdir -m 700 private && for i in 1 2 3; do echo b$i > private/data_$i.bin; done'], working_dir: beta, selector: {}, gpus: 0 });
    const m = await c.client.waitFor(made.id, undefined, 60_000);
    expect(m.state, m.reason ?? '').toBe('SUCCEEDED');
    betaUid = fs.statSync(path.join(beta, 'private')).uid;
    await c.client.request('PUT', '/projects/alpha/experiments/hostile/retention', { keep_best: 1, keep_latest: 1 });
  });
  afterAll(async () => {
    await c?.stop();
    if (!skip) execFileSync('nft', ['delete', 'table', 'inet', 'gpuplane_hostile_node'], { stdio: 'ignore' });
    fs.rmSync(base, { recursive: true, force: true });
  });

  const events = async (jobId: string) => (await c.client.request<{ events: EventJson[] }>('GET', `/jobs/${jobId}/events`)).events;
  const checkpointsOf = async (jobId: string) => {
    const runId = (await c.client.job(jobId)).attempts.at(-1)?.run_id;
    return runId ? (await c.client.request<{ checkpoints: CheckpointJson[] }>('GET', `/checkpoints?run=${runId}`)).checkpoints : [];
  };
  const train = (name: string, script: string) =>
    c.client.submit({ type: 'TRAIN', project: 'alpha', experiment: 'hostile', command: ['sh', '-c', script], working_dir: path.join(base, name), watch_dir: 'ckpts', selector: {}, gpus: 1 });

  it('a checkpoint folder that the job links to another tenant\'s folder is not watched: nothing registered, nothing deleted, and an event says why', async () => {
    // The link appears after the attempt started (the agent checked an absent folder then).
    const job = await train('late-link', `sleep 1; ln -s ${path.join(beta, 'private')} ckpts; ln -s ${rootOnly} other; sleep 2`);
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(await checkpointsOf(job.id)).toEqual([]);
    const said = (await events(job.id)).filter((e) => e.kind === 'checkpoint.watcher').map((e) => e.message);
    expect(said.join('\n')).toMatch(/is a symbolic link/);
    expect(files(path.join(beta, 'private'))).toEqual(['data_1.bin', 'data_2.bin', 'data_3.bin']);
    expect(files(rootOnly)).toEqual(['important_1.conf', 'important_2.conf', 'important_3.conf']);
  });

  it('an attempt whose checkpoint folder is a link, or another user\'s folder, is refused before it starts, with the reason', async () => {
    const plant = await c.client.submit({ type: 'CUSTOM', project: 'alpha', command: ['sh', '-c', `ln -s ${rootOnly} ckpts`], working_dir: path.join(base, 'linked'), selector: {}, gpus: 0 });
    expect((await c.client.waitFor(plant.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const linked = await c.client.waitFor((await train('linked', 'touch ran; sleep 1')).id, undefined, 60_000);
    expect(linked.state).toBe('FAILED');
    expect(linked.reason).toMatch(/checkpoint folder .*\/linked\/ckpts is a symbolic link/);
    expect(fs.existsSync(path.join(base, 'linked', 'ran'))).toBe(false);
    // --workdir <shared> --watch beta/private: a real folder, but beta's user's.
    const shared = await c.client.submit({ type: 'TRAIN', project: 'alpha', experiment: 'hostile', command: ['sh', '-c', 'touch /tmp/never'], working_dir: base, watch_dir: 'beta/private', selector: {}, gpus: 1 });
    const s = await c.client.waitFor(shared.id, undefined, 60_000);
    expect(s.state).toBe('FAILED');
    expect(s.reason).toMatch(new RegExp(`beta/private belongs to uid ${betaUid}, not to the job's user`));
    expect(files(path.join(beta, 'private'))).toEqual(['data_1.bin', 'data_2.bin', 'data_3.bin']);
  });

  it('links inside the folder are never followed, hashed or registered, a link loop holds nothing, and an event names what was skipped', async () => {
    const job = await train(
      'links',
      [
        'mkdir -p ckpts/bomb ckpts/step_3',
        'echo one > ckpts/step_1.pt',
        `ln -s ${c.home}/admin-token ckpts/step_2`,
        'ln -s /etc/shadow ckpts/step_4',
        'ln -s . ckpts/bomb/a',
        'echo three > ckpts/step_3/model.bin',
        `ln -s ${path.join(beta, 'private')} ckpts/step_3/data`,
        'sleep 2',
      ].join('; '),
    );
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    const names = (await checkpointsOf(job.id)).map((k) => path.basename(k.uri)).sort();
    // Retention (keep best 1, latest 1) may have let step_1 go; no link was ever registered.
    expect(names).not.toContain('step_2');
    expect(names).not.toContain('step_4');
    expect(names).toContain('step_3');
    const skipped = (await events(job.id)).filter((e) => e.kind === 'checkpoint.skipped');
    const links = skipped.flatMap((e) => (e.data?.links as string[]) ?? []).sort();
    expect(links).toEqual(['bomb/a', 'step_2', 'step_3/data', 'step_4']);
    expect(skipped[0].message).toMatch(/symbolic links are never followed/);
    // step_3 was hashed without its link: its fingerprint is that of model.bin alone.
    const step3 = (await checkpointsOf(job.id)).find((k) => k.uri.endsWith('/step_3'))!;
    const { createHash } = await import('node:crypto');
    expect(step3.fingerprint).toBe(`sha256:${createHash('sha256').update('model.bin\u00006\u0000three\n').digest('hex')}`);
  });

  it("another job of the project ending (its leftovers swept by uid) leaves the watcher, which runs as the same user, watching", async () => {
    const job = await train('sweep-spares', 'mkdir -p ckpts; for i in 1 2 3 4; do echo $i > ckpts/step_$i.pt; sleep 1; done');
    // Ends while the training job writes: the agent kills every leftover process of alpha's uid.
    const short = await c.client.submit({ type: 'CUSTOM', project: 'alpha', command: ['sh', '-c', 'sleep 1'], working_dir: path.join(base, 'short'), selector: {}, gpus: 0 });
    expect((await c.client.waitFor(short.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect((await checkpointsOf(job.id)).map((k) => path.basename(k.uri)).sort()).toEqual(['step_1.pt', 'step_2.pt', 'step_3.pt', 'step_4.pt']);
  });

  it('a folder of more entries than the watcher takes is not watched, and the plane keeps answering meanwhile', async () => {
    const job = await train('crowd', `mkdir crowd && python3 -c 'for i in range(20000): open("crowd/f%d" % i, "w").close()' && echo x > crowd/step_1.pt && mv crowd ckpts && sleep 3`);
    const started = Date.now();
    const times: number[] = [];
    while (Date.now() - started < 60_000) {
      const t0 = performance.now();
      await c.client.jobs({ project: 'beta', limit: 10 });
      times.push(performance.now() - t0);
      if (['SUCCEEDED', 'FAILED'].includes((await c.client.job(job.id)).state)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(await checkpointsOf(job.id)).toEqual([]);
    await until('the watcher said why', async () => (await events(job.id)).some((e) => /holds more than 10000 entries/.test(e.message)), 10_000);
    times.sort((a, b) => a - b);
    const p99 = times[Math.floor(times.length * 0.99)] ?? 0;
    console.log(`GET /jobs while a job filled its checkpoint folder: ${times.length} requests, median ${times[Math.floor(times.length / 2)]?.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`);
    expect(times.length).toBeGreaterThan(3);
  });
});
