import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, parseStorage, type ObjectStore } from '../runtime/object-store.ts';
import { startS3Server, type S3Server } from '../runtime/s3-server.ts';
import type { JobDetailJson } from '../cli/client.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { gpuctlIn } from './support/gpuctl-cli.ts';
import { jobUsersSkipReason } from './support/job-users.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';

const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces, which only root makes');
const SUBNET = 37;

/**
 * Code that travels (issue 44, section 3): `gpuctl submit --code DIR` snapshots a folder that is
 * only on the submitting machine (this one's /tmp: every isolated node has a /tmp of its own),
 * uploads it once to the project's store (a real S3 server, versitygw), and the node the job lands
 * on fetches it, unpacks it as the job's user into a working dir of the job's own, and runs the
 * process there. A retry with --code runs the new code; a sweep's trials share one snapshot; a folder over the limit is refused before
 * anything is sent; a git checkout's commit and dirtiness are recorded on the job and its run.
 */
describe.skipIf(skip)('code snapshots on isolated nodes', () => {
  let s3: S3Server;
  let c: Cluster;
  let store: ObjectStore;
  let env: NodeJS.ProcessEnv;
  const tmp = fs.mkdtempSync('/var/tmp/gpuplane-code-e2e-');
  // Only on this machine: the nodes' /tmp is their own.
  const here = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-code-src-'));

  beforeAll(async () => {
    s3 = await startS3Server({ dir: path.join(tmp, 's3'), host: '0.0.0.0', port: await freePort(), accessKeyId: 'code-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['code'] });
    const storage = { ...s3.env(), GPUPLANE_S3_ENDPOINT: s3.endpoint.replace('127.0.0.1', `10.233.${SUBNET}.1`), GPUPLANE_STORAGE: 's3://code/plane' };
    // A node keeps an ended job's unpacked code 1 s (7 days by default), and looks every 2 s.
    const agentEnv = { GPUPLANE_JOB_USERS: '3800200-3800299', GPUPLANE_CODE_WORKDIR_KEEP_S: '1' };
    // Node A's agent has no store of its own (GPUPLANE_STORAGE=local there): it reads code through the API.
    c = await startCluster('codesnap', { isolate: { subnet: SUBNET }, env: storage, agents: [{ nodeId: 'cd-a', gpus: 1, env: { ...agentEnv, GPUPLANE_STORAGE: 'local' } }, { nodeId: 'cd-b', gpus: 1, env: agentEnv }] });
    store = await openStore(parseStorage('s3://code/plane'), { home: tmp, env: s3.env() });
    env = { ...c.env, GPUPLANE_API_URL: c.apiUrl, GPUPLANE_TOKEN: c.token };
  });
  afterAll(async () => {
    await store?.close();
    await c?.stop();
    await s3?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(here, { recursive: true, force: true });
  });

  /** A folder under this machine's /tmp with these files. */
  function folder(name: string, files: Record<string, string>): string {
    const root = path.join(here, name);
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    }
    return root;
  }
  const codeKeys = async () => (await store.list('code/')).map((o) => o.key);
  const logOf = async (jobId: string) => (await fetch(`${c.apiUrl}/api/v1/jobs/${jobId}/logs`, { headers: { authorization: `Bearer ${c.token}` } })).text();

  it('a job submitted with --code from a folder only this machine has runs on node B in its own unpacked copy, as the job user; its git commit and dirtiness are recorded', async () => {
    const src = folder('train', { 'hello.txt': 'hello from the submitting machine\n', 'secret.txt': 'never uploaded\n', '.gitignore': 'secret.txt\n', 'lib/util.py': 'x = 1\n' });
    const git = (...args: string[]) => execFileSync('git', ['-C', src, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { stdio: 'pipe' }).toString().trim();
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'one');
    const commit = git('rev-parse', 'HEAD');
    fs.appendFileSync(path.join(src, 'lib/util.py'), 'y = 2\n');
    // An executable script keeps its x bit on the node.
    fs.writeFileSync(path.join(src, 'tool.sh'), '#!/bin/sh\necho "tool ran"\n', { mode: 0o755 });
    const script = 'cat hello.txt; ./tool.sh; echo "cwd=$(pwd)"; echo "owner=$(stat -c %u .) me=$(id -u)"; test -e secret.txt && echo leaked || echo no-secret';
    const r = await gpuctlIn(env, ['submit', '--code', src, '--project', 'code', '--type', 'CUSTOM', '--selector', 'node=cd-b', '--', 'sh', '-c', script]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^gpuctl: code [0-9a-f]{12} \(4 files, 0\.0 MiB\) uploaded\n$/);
    const jobId = r.stdout.trim().split('\n').pop()!;
    const done: JobDetailJson = await c.client.waitFor(jobId, undefined, 60_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.node_id).toBe('cd-b');
    const code = done.code!;
    expect(code).toMatchObject({ git: { commit, dirty: true } });
    expect(code.key).toMatch(new RegExp(`^code/prj-[^/]+/${code.sha256}\\.tar$`));
    expect((await store.head(code.key))?.size).toBe(code.bytes);
    expect(done.working_dir).toBe(`/var/tmp/gpuplane-code/${jobId}/${code.sha256.slice(0, 16)}/code`);
    const log = await until('the log', async () => {
      const got = await logOf(jobId);
      return got.includes('no-secret') ? got : null;
    }, 15_000);
    expect(log).toContain('hello from the submitting machine');
    expect(log).toContain('tool ran');
    expect(log).toContain(`cwd=${done.working_dir}`);
    const [, owner, me] = /owner=(\d+) me=(\d+)/.exec(log)!;
    expect(owner).toBe(me);
    expect(Number(me)).toBeGreaterThanOrEqual(3800200);
    expect(Number(me)).toBeLessThanOrEqual(3800299);
    // Ended longer ago than the node keeps unpacked code, with no checkpoint there: its folder leaves node B (seen through the node's mounts).
    const holder = fs.readFileSync(path.join(c.nodes.get('cd-b')!.dataDir, '.node-mounts.pid'), 'utf8').trim();
    expect(fs.existsSync(`/proc/${holder}/root/var/tmp/gpuplane-code`)).toBe(true);
    await until(`job ${jobId}'s unpacked code deleted from cd-b`, async () => !fs.existsSync(`/proc/${holder}/root/var/tmp/gpuplane-code/${jobId}`), 30_000);
    // The fetch is an event of the attempt; the run records the snapshot; gpuctl job and run say it.
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${jobId}/events`)).events.filter((e) => e.kind === 'code.fetched');
    expect(events.map((e) => e.message)).toEqual([expect.stringMatching(new RegExp(`^code ${code.sha256.slice(0, 12)} fetched from the store \\(${code.bytes} bytes\\), unpacked into ${done.working_dir} in [\\d.]+ s$`))]);
    const shown = await gpuctlIn(env, ['job', jobId]);
    expect(shown.stdout).toMatch(new RegExp(`code:\\s+sha256 ${code.sha256.slice(0, 12)} \\(\\d+\\.\\d KiB\\), git ${commit.slice(0, 12)} \\(dirty\\)`));
    // The same folder again: nothing is uploaded, and the project still holds one object.
    const again = await gpuctlIn(env, ['submit', '--code', src, '--project', 'code', '--type', 'CUSTOM', '--', 'true']);
    expect(again.stderr).toMatch(/is in the store already/);
    expect((await codeKeys()).filter((k) => k.endsWith(`${code.sha256}.tar`))).toHaveLength(1);
  });

  it('a node whose agent has no store fetches the code through the API with its node token', async () => {
    const src = folder('via-api', { 'data/msg.txt': 'read through the API\n' });
    const r = await gpuctlIn(env, ['submit', '--code', src, '--project', 'code', '--type', 'CUSTOM', '--selector', 'node=cd-a', '--', 'cat', 'data/msg.txt']);
    expect(r.code, r.stderr).toBe(0);
    const jobId = r.stdout.trim().split('\n').pop()!;
    const done = await c.client.waitFor(jobId, undefined, 60_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.node_id).toBe('cd-a');
    expect(await until('the log', async () => ((await logOf(jobId)).includes('read through the API') ? true : null), 15_000)).toBe(true);
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${jobId}/events`)).events.filter((e) => e.kind === 'code.fetched');
    expect(events.map((e) => e.message)).toEqual([expect.stringMatching(/ fetched from the API \(\d+ bytes\), unpacked into /)]);
  });

  it('gpuctl retry --code runs the new code in a copy of its own, and says so in the attempt\'s changes; a hash the project lacks, or code with working_dir, is a 400', async () => {
    const src = folder('retry', { 'run.sh': 'echo "version one"; exit 3\n' });
    const r = await gpuctlIn(env, ['submit', '--code', src, '--project', 'code', '--type', 'CUSTOM', '--', 'sh', 'run.sh']);
    expect(r.code, r.stderr).toBe(0);
    const jobId = r.stdout.trim().split('\n').pop()!;
    const failed = await c.client.waitFor(jobId, undefined, 60_000);
    expect(failed.state).toBe('FAILED');
    const before = failed.code!;
    fs.writeFileSync(path.join(src, 'run.sh'), 'echo "version two"\n');
    const retried = await gpuctlIn(env, ['retry', jobId, '--code', src]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stderr).toMatch(/^gpuctl: code [0-9a-f]{12} \(1 files, 0\.0 MiB\) uploaded\n$/);
    const done = await c.client.waitFor(jobId, undefined, 60_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    const after = done.code!;
    expect(after.sha256).not.toBe(before.sha256);
    expect(after.key).toMatch(new RegExp(`^code/prj-[^/]+/${after.sha256}\\.tar$`));
    expect(done.working_dir).toBe(`/var/tmp/gpuplane-code/${jobId}/${after.sha256.slice(0, 16)}/code`);
    expect(retried.stdout).toContain(`code.sha256 ${JSON.stringify(before.sha256)} → ${JSON.stringify(after.sha256)}`);
    expect(done.attempts[1].changes).toEqual(expect.arrayContaining([{ key: 'code.sha256', from: before.sha256, to: after.sha256 }, { key: 'workingDir', from: failed.working_dir, to: done.working_dir }]));
    expect(await until('the log', async () => ((await logOf(jobId)).includes('version two') ? true : null), 15_000)).toBe(true);
    // Refused before anything is made: the job stays at its attempt.
    const retry = (body: Record<string, unknown>) => c.client.exchange('POST', `/jobs/${jobId}/retry`, body).catch((e: { status: number; message: string }) => e);
    const unknown = 'f'.repeat(64);
    expect(await retry({ code: { sha256: unknown } })).toMatchObject({ status: 400, message: `code: no snapshot ${unknown} is uploaded for project code (PUT /api/v1/code/${unknown}?project=code first; gpuctl's --code does)` });
    expect(await retry({ code: { sha256: after.sha256 }, working_dir: '/tmp' })).toMatchObject({ status: 400, message: expect.stringMatching(/give code .* or working_dir .*, not both/) });
    expect((await c.client.job(jobId)).attempt).toBe(2);
  });

  it("a sweep's trials share one snapshot: one object in the store, every trial runs it", async () => {
    const base = path.join(here, 'sweep');
    folder('sweep/src', { 'train.sh': 'echo "trial of lr=$1"\n' });
    fs.writeFileSync(path.join(base, 'sweep.yaml'), ['project: code', 'code: src', 'command: sh train.sh 1', 'gpus: 0', 'method: grid', 'parameters:', '  lr: {values: [0.1, 0.01, 0.001]}', ''].join('\n'));
    const before = await codeKeys();
    const made = await gpuctlIn(env, ['sweep', 'create', path.join(base, 'sweep.yaml')]);
    expect(made.code, made.stderr).toBe(0);
    const sweepId = made.stdout.trim().split('\n').pop()!;
    const s = await until('the sweep ends', async () => {
      const d = await c.client.request<{ state: string; leaderboard: { job_id: string; state: string }[] }>('GET', `/sweeps/${sweepId}`);
      return d.state !== 'RUNNING' ? d : null;
    }, 60_000);
    expect(s.leaderboard.map((t) => t.state)).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
    const added = (await codeKeys()).filter((k) => !before.includes(k));
    expect(added).toHaveLength(1);
    const trials = await Promise.all(s.leaderboard.map((t) => c.client.job(t.job_id)));
    expect(new Set(trials.map((t) => t.code?.key))).toEqual(new Set(added));
    // Each trial has a working dir of its own.
    expect(new Set(trials.map((t) => t.working_dir)).size).toBe(3);
  });

  it('refuses in one line, and sends nothing: a folder over --code-limit (naming its largest files), one that is missing or not a folder, --code with --workdir', async () => {
    const big = folder('big', { 'weights.bin': 'w'.repeat(8000), 'small.txt': 's' });
    const before = await codeKeys();
    const jobsBefore = (await c.client.jobs({ limit: 1000 })).length;
    const cases: [string[], RegExp][] = [
      [['--code', big, '--code-limit', '4K'], /^gpuctl: --code .*big: 0\.0 MiB in 2 files is over the limit of 0\.0 MiB \(--code-limit\); the largest: weights\.bin \(0\.0 MiB\), small\.txt/],
      [['--code', path.join(here, 'nope')], /no such folder$/],
      [['--code', path.join(big, 'small.txt')], /not a folder$/],
      [['--code', big, '--workdir', '/tmp'], /--code and --workdir/],
    ];
    for (const [args, said] of cases) {
      const r = await gpuctlIn(env, ['submit', ...args, '--project', 'code', '--', 'true']);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr.trim()).toMatch(said);
    }
    expect(await codeKeys()).toEqual(before);
    expect((await c.client.jobs({ limit: 1000 })).length).toBe(jobsBefore);
  });

  it("the API refuses a malformed hash, a hash not uploaded (or another project's), and an upload whose bytes are not its hash, in one line, nothing made", async () => {
    const [own] = (await codeKeys()).filter((k) => k.endsWith('.tar'));
    const sha = path.basename(own, '.tar');
    const submit = (body: Record<string, unknown>) => c.client.exchange('POST', '/jobs', { command: ['true'], type: 'CUSTOM', ...body }).catch((e: { status: number; message: string }) => e);
    const bad = await submit({ project: 'code', code: { sha256: 'XYZ' } });
    expect(bad).toMatchObject({ status: 400, message: expect.stringMatching(/code\/sha256/) });
    const elsewhere = await submit({ project: 'other', code: { sha256: sha } });
    expect(elsewhere).toMatchObject({ status: 400, message: `code: no snapshot ${sha} is uploaded for project other (PUT /api/v1/code/${sha}?project=other first; gpuctl's --code does)` });
    const both = await submit({ project: 'code', code: { sha256: sha }, working_dir: '/tmp' });
    expect(both).toMatchObject({ status: 400, message: expect.stringMatching(/give code .* or working_dir .*, not both/) });
    const wrong = await fetch(`${c.apiUrl}/api/v1/code/${'0'.repeat(64)}?project=code`, { method: 'PUT', headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/x-tar' }, body: 'not the tar of that hash' });
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { message: string }).message).toMatch(/^the body's sha256 is [0-9a-f]{64}, not 0{64}: nothing was kept$/);
    expect((await codeKeys()).some((k) => k.includes('0'.repeat(64)))).toBe(false);
  });
});
