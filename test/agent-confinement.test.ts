/**
 * What an agent refuses to do with what Temporal hands it (forged ids, working dirs outside its
 * allowed roots), what it writes (private modes, never its node token), and the credential a
 * job gets (its run token, never the agent's). The activities run as the agent runs them,
 * through MockActivityEnvironment with real shims and processes; the last block starts a real
 * agent with `GPUPLANE_ALLOWED_ROOTS` and `GPUPLANE_NODE_TOKEN`.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { GpuplaneConfig } from '../config.ts';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGpuHostActivities, type GpuHostDeps } from '../activities/gpu-host.ts';
import { ProcessTable } from '../activities/gpu-host/process-table.ts';
import { INVALID_ATTEMPT } from '../workflows/failures.ts';
import { passEnvRefusal } from '../domain/job-env.ts';
import { newToken, parseRunToken, RUN_TOKEN_TTL_S, runToken } from '../runtime/tokens.ts';
import { CheckpointWatching } from '../activities/gpu-host/checkpoint-watching.ts';
import { LogShipping } from '../activities/gpu-host/log-shipper.ts';
import { agentDataDir } from '../workers/gpu-host/serve.ts';
import type { AttemptSpec, ProcessExit } from '../workflows/types.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { parseEnv } from './support/env.ts';

const id = (prefix: string) => `${prefix}-${randomBytes(8).toString('hex')}`;

/** A stand-in Temporal client: every signal is taken. */
const client = { workflow: { getHandle: () => ({ signal: async () => undefined }) } } as unknown as Client;

function activities(dataDir: string, o: Partial<GpuHostDeps> = {}) {
  return createGpuHostActivities({
    nodeId: 'n1',
    processes: new ProcessTable(1000, path.join(dataDir, 'run')),
    client,
    inventory: () => ({ nodeId: 'n1', labels: {}, hostname: 'h', gpus: [] }),
    logDir: path.join(dataDir, 'logs'),
    apiUrl: 'http://127.0.0.1:9',
    passEnv: [],
    checkpoints: new CheckpointWatching({ client, debounceMs: 50, send: async () => undefined }),
    ...o,
  });
}

const specOf = (workingDir: string, o: Partial<AttemptSpec> = {}): AttemptSpec => ({
  jobId: id('job'),
  attempt: 1,
  type: 'CUSTOM',
  runId: null,
  nodeId: 'n1',
  command: ['/bin/sh', '-c', 'true'],
  workingDir,
  env: {},
  params: {},
  gpuIndices: [],
  lostAfterMs: 60_000,
  ...o,
});

/** Every entry under `root`: kind, mode, mtime and (for files) content; equal before and after means untouched. */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const p = path.join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(p);
      if (st.isSymbolicLink()) out[r] = `link ${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = `dir ${st.mode.toString(8)} ${st.mtimeMs}`;
        walk(p, r);
      } else out[r] = `file ${st.mode.toString(8)} ${st.mtimeMs} ${fs.readFileSync(p, 'utf8')}`;
    }
  };
  walk(root, '');
  return out;
}

/** Each file and folder under `root` with its permission bits. */
function modes(root: string): Record<string, number> {
  const out: Record<string, number> = {};
  const walk = (dir: string, rel: string) => {
    for (const name of fs.readdirSync(dir)) {
      const p = path.join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(p);
      out[st.isDirectory() ? `${r}/` : r] = st.mode & 0o777;
      if (st.isDirectory()) walk(p, r);
    }
  };
  walk(root, '');
  return out;
}

/** Runs an activity as a worker would, in its own activity context (the failures expected here are not logged). */
const quiet = new DefaultLogger('ERROR');
const activity = <A extends unknown[], R>(fn: (...a: A) => Promise<R>, ...args: A): Promise<R> =>
  new MockActivityEnvironment({ heartbeatTimeoutMs: 5000 }, { logger: quiet }).run(fn, ...args) as Promise<R>;

describe('an agent given forged attempt ids', () => {
  let base: string;
  let dataDir: string;
  let acts: ReturnType<typeof activities>;
  beforeEach(() => {
    // base/data is the agent's data folder; everything else under base is "outside" it.
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-forged-'));
    dataDir = path.join(base, 'data');
    acts = activities(dataDir);
    // What a path-like job id of "../../planted" would reach from the run and log folders:
    // an ended attempt's status and record, and its log.
    fs.writeFileSync(path.join(base, 'planted.1.status'), '0\n');
    fs.writeFileSync(path.join(base, 'planted.1.json'), '{}');
    fs.mkdirSync(path.join(base, 'planted'));
    fs.writeFileSync(path.join(base, 'planted', 'attempt-1.log'), 'not yours\n');
    fs.mkdirSync(path.join(base, 'work'));
  });
  afterEach(() => {
    fs.rmSync(base, { recursive: true, force: true });
  });

  const tmpName = `gpuplane-forged-abs-${randomBytes(4).toString('hex')}`;
  const badJobIds = () => [
    '../../planted',
    'job-abcdefgh/../../planted',
    '../../x',
    'job-abc/../../x',
    `/tmp/${tmpName}`,
    path.join(base, 'abs'),
    '',
    'job-abc',
    'JOB-ABCDEFGH12',
    'job-abcdefgh12\n',
    'job-abcdefgh12/',
    42,
    null,
  ];
  const badAttempts = [0, -1, 1.5, '1/../../x', Number.NaN, 1e9];
  const badRunIds = ['../../planted', 'run-abcdefgh/../x', '/etc/passwd'];

  it('refuses them for good in runJob, watchJob and stopAttempt, and touches nothing on disk', async () => {
    const before = tree(base);
    const ran = path.join(base, 'ran');
    const cmd = ['/bin/sh', '-c', `touch ${ran}`];
    const forged: AttemptSpec[] = [
      ...badJobIds().map((jobId) => specOf(path.join(base, 'work'), { jobId: jobId as string, command: cmd, watchDir: 'ckpt' })),
      ...badAttempts.map((attempt) => specOf(path.join(base, 'work'), { attempt: attempt as number, command: cmd })),
      ...badRunIds.map((runId) => specOf(path.join(base, 'work'), { type: 'TRAIN', runId, command: cmd })),
    ];
    for (const spec of forged) {
      const refused = { type: INVALID_ATTEMPT, nonRetryable: true, message: expect.stringMatching(/^refused: .* is not (a GPUPlane id|a positive integer)$/) };
      await expect(activity(acts.runJob, spec), JSON.stringify(spec.jobId)).rejects.toMatchObject(refused);
      if (spec.runId) continue;
      await expect(activity(acts.watchJob, { jobId: spec.jobId, attempt: spec.attempt })).rejects.toMatchObject(refused);
      await expect(activity(acts.stopAttempt, { jobId: spec.jobId, attempt: spec.attempt })).rejects.toMatchObject(refused);
    }
    // Nothing ran, nothing outside the data folder was created, read into a result, or deleted,
    // and the data folder itself is as it was.
    expect(fs.existsSync(ran)).toBe(false);
    expect(tree(base)).toEqual(before);
    expect(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(tmpName))).toEqual([]);
  });

  it('still runs and watches an attempt with real ids', async () => {
    const spec = specOf(path.join(base, 'work'), { type: 'TRAIN', runId: id('run'), command: ['/bin/sh', '-c', 'exit 3'] });
    expect(await activity(acts.runJob, spec)).toMatchObject({ exitCode: 3, spawnError: null });
    expect(await activity(acts.watchJob, { jobId: spec.jobId, attempt: 1 })).toMatchObject({ exitCode: 3 });
    // Nothing of it lives outside the data folder.
    expect(fs.readdirSync(base).sort()).toEqual(['data', 'planted', 'planted.1.json', 'planted.1.status', 'work']);
  });
});

describe('an agent with allowed roots', () => {
  let base: string;
  let root: string;
  let outside: string;
  let acts: ReturnType<typeof activities>;
  beforeAll(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-roots-'));
    root = path.join(base, 'root');
    outside = path.join(base, 'outside');
    fs.mkdirSync(path.join(root, 'inside'), { recursive: true });
    fs.mkdirSync(path.join(outside, 'deep'), { recursive: true });
    fs.writeFileSync(path.join(outside, 'victim.pt'), 'keep me');
    fs.symlinkSync(outside, path.join(root, 'link'));
    fs.symlinkSync(path.join(outside, 'deep'), path.join(root, 'deeplink'));
    fs.symlinkSync(outside, path.join(root, 'inside', 'ckpt-out'));
    fs.symlinkSync(path.join(outside, 'not-yet'), path.join(root, 'inside', 'dangling'));
    acts = activities(path.join(base, 'data'), { allowedRoots: [root] });
  });
  afterAll(() => {
    fs.rmSync(base, { recursive: true, force: true });
  });

  const marker = () => path.join(base, `ran-${randomBytes(4).toString('hex')}`);
  const run = (workingDir: string, o: Partial<AttemptSpec> = {}) => activity(acts.runJob, specOf(workingDir, o));

  it.each([
    ['a `..` out of the root', () => path.join(root, '..', 'outside')],
    ['`..` after a symlink (the kernel follows the link first)', () => `${root}/deeplink/..`],
    ['a symlink pointing out of the root', () => path.join(root, 'link')],
    ['an absolute path elsewhere', () => outside],
  ])('refuses a working dir through %s before anything runs', async (_what, dir) => {
    const ran = marker();
    const exit: ProcessExit = await run(dir(), { command: ['/bin/sh', '-c', `touch ${ran}`] });
    expect(exit).toMatchObject({ exitCode: null, signal: null });
    expect(exit.spawnError).toContain(`working dir ${dir()}`);
    expect(exit.spawnError).toContain(`outside the agent's allowed roots: ${root}`);
    expect(fs.existsSync(ran)).toBe(false);
  });

  it.each([
    ['`..` out of the working dir', '../../outside'],
    ['a symlink out of the root', 'ckpt-out'],
    ['a dangling symlink out of the root', 'dangling/ckpt'],
  ])('refuses a checkpoint folder through %s', async (_what, watchDir) => {
    const ran = marker();
    const exit = await run(path.join(root, 'inside'), { watchDir, command: ['/bin/sh', '-c', `touch ${ran}`] });
    expect(exit.spawnError).toMatch(/^checkpoint folder .* is outside the agent's allowed roots: /);
    expect(fs.existsSync(ran)).toBe(false);
  });

  it('runs an attempt whose working dir and checkpoint folder are inside a root', async () => {
    const ran = marker();
    const exit = await run(path.join(root, 'inside'), { watchDir: 'ckpt', command: ['/bin/sh', '-c', `touch ${ran}`] });
    expect(exit).toMatchObject({ exitCode: 0, spawnError: null });
    expect(fs.existsSync(ran)).toBe(true);
    // A symlink that stays inside is fine too.
    fs.symlinkSync(path.join(root, 'inside'), path.join(root, 'alias'));
    expect(await run(path.join(root, 'alias'))).toMatchObject({ exitCode: 0, spawnError: null });
  });

  it('deletes retention\'s checkpoints only in a folder inside a root', async () => {
    const r = await activity(acts.deleteCheckpoints, { root: outside, uris: [path.join(outside, 'victim.pt')] });
    expect(r.deleted).toEqual([]);
    expect(r.refused[0].reason).toContain('outside the agent\'s allowed roots');
    const viaLink = await activity(acts.deleteCheckpoints, { root: path.join(root, 'link'), uris: [path.join(root, 'link', 'victim.pt')] });
    expect(viaLink.deleted).toEqual([]);
    expect(fs.readFileSync(path.join(outside, 'victim.pt'), 'utf8')).toBe('keep me');
    const ckpt = path.join(root, 'inside', 'ckpt');
    fs.mkdirSync(ckpt, { recursive: true });
    fs.writeFileSync(path.join(ckpt, 'step-1.pt'), 'x');
    expect(await activity(acts.deleteCheckpoints, { root: ckpt, uris: [path.join(ckpt, 'step-1.pt')] })).toEqual({ deleted: [path.join(ckpt, 'step-1.pt')], refused: [] });
  });

  it('will not start with a root that is not there', () => {
    expect(() => activities(path.join(base, 'data2'), { allowedRoots: [path.join(base, 'nope')] })).toThrow(/allowed root .*nope: not found/);
  });
});

/** A job's run token: the one its agent derives from its node token for this run and attempt, good for RUN_TOKEN_TTL_S from when it started. */
function expectRunToken(token: string, nodeToken: string, runId: string, attempt: number, startedS: number): void {
  const claims = parseRunToken(token);
  expect(claims).toMatchObject({ runId, attempt });
  expect(token).toBe(runToken(nodeToken, runId, attempt, claims!.exp));
  expect(claims!.exp).toBeGreaterThanOrEqual(startedS + RUN_TOKEN_TTL_S);
  expect(claims!.exp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + RUN_TOKEN_TTL_S);
}

describe("what an agent writes, and a job's credentials", () => {
  let base: string;
  let server: http.Server;
  let apiUrl: string;
  const seen: { method: string; url: string; authorization: string | undefined }[] = [];
  const agentSecrets = { GPUPLANE_TOKEN: 'gpr_agent-own.x', GPUPLANE_NODE_TOKEN: 'node-token-in-env', GPUPLANE_ADMIN_TOKEN: 'admin-token-in-env' };
  /** What the stand-in API confirms for a launch: the spec the test runs (set by each test). */
  let dispatched: AttemptSpec | null = null;
  beforeAll(async () => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-private-'));
    // The log API, as far as a shipper needs it: it stores nothing and takes everything.
    server = http.createServer((req, res) => {
      seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization });
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        const u = new URL(req.url!, 'http://x');
        if (u.pathname.endsWith('/launch') && dispatched) {
          const d = dispatched;
          const launch = { node_id: 'n1', run_id: d.runId, command: d.command, working_dir: d.workingDir, env: d.env, gpu_indices: d.gpuIndices, watch_dir: d.watchDir ?? null, secret_env: {} };
          return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(launch));
        }
        const body = req.method === 'GET' ? { refs: [] } : { size_bytes: Number(u.searchParams.get('offset')) + Buffer.concat(chunks).length, complete: u.searchParams.get('final') === 'true' };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    Object.assign(process.env, agentSecrets);
  });
  afterAll(async () => {
    for (const k of Object.keys(agentSecrets)) delete process.env[k];
    await new Promise((r) => server.close(r));
    fs.rmSync(base, { recursive: true, force: true });
  });

  it('gives a job its run token, never the agent\'s credentials, and keeps its files private', async () => {
    const nodeToken = newToken();
    const dataDir = path.join(base, 'data');
    const work = path.join(base, 'work');
    fs.mkdirSync(work);
    const logs = new LogShipping({ apiUrl, nodeId: 'n1', token: nodeToken, pollMs: 20 });
    // Asking for them does not help: the agent's credentials are refused by name.
    const acts = activities(dataDir, { nodeToken, logs, apiUrl, passEnv: Object.keys(agentSecrets), allowedRoots: [base] });
    const spec = specOf(work, { type: 'TRAIN', runId: id('run'), command: ['/bin/sh', '-c', 'env -0 > env.out; echo out; echo err >&2'] });
    dispatched = spec;
    // Whatever the umask, the agent's files are its own.
    const umask = process.umask(0);
    const startedS = Math.floor(Date.now() / 1000);
    let exit: ProcessExit;
    try {
      exit = await activity(acts.runJob, spec);
    } finally {
      process.umask(umask);
    }
    expect(exit).toMatchObject({ exitCode: 0, spawnError: null });

    const jobEnv = parseEnv(fs.readFileSync(path.join(work, 'env.out'), 'utf8'));
    expectRunToken(jobEnv.GPUPLANE_TOKEN, nodeToken, spec.runId!, spec.attempt, startedS);
    expect(jobEnv.GPUPLANE_RUN_ID).toBe(spec.runId);
    expect(jobEnv).not.toHaveProperty('GPUPLANE_NODE_TOKEN');
    expect(jobEnv).not.toHaveProperty('GPUPLANE_ADMIN_TOKEN');
    for (const secret of [nodeToken, ...Object.values(agentSecrets)]) expect(Object.values(jobEnv)).not.toContain(secret);
    for (const name of Object.keys(agentSecrets)) expect(passEnvRefusal(name)).toMatch(/credential/);

    const logDir = path.join('logs', spec.jobId);
    expect(modes(dataDir)).toEqual({
      'logs/': 0o700,
      [`${logDir}/`]: 0o700,
      [`${logDir}/attempt-1.log`]: 0o600,
      [`${logDir}/attempt-1.stderr.log`]: 0o600,
      'run/': 0o700,
      [`run/${spec.jobId}.1.json`]: 0o600,
      [`run/${spec.jobId}.1.status`]: 0o600,
    });
    // The node token is on no file the agent wrote.
    for (const f of Object.keys(modes(dataDir)).filter((k) => !k.endsWith('/'))) expect(fs.readFileSync(path.join(dataDir, f), 'utf8')).not.toContain(nodeToken);

    // Every request to the API carried the node's token, the stored-size lookup of a resumed shipper included.
    const resumed = logs.ship(spec.jobId, 2, path.join(dataDir, logDir, 'attempt-1.log'), Promise.resolve());
    expect(await resumed.flush(5000)).toBe(true);
    expect(seen.some((r) => r.method === 'POST')).toBe(true);
    expect(seen.some((r) => r.method === 'GET' && r.url.includes('/logs/refs'))).toBe(true);
    expect(seen.filter((r) => r.authorization !== `Bearer ${nodeToken}`)).toEqual([]);
  });

  it('starts nothing when the task is not what the control plane dispatched', async () => {
    const dataDir = path.join(base, 'data-forged');
    const work = path.join(base, 'work-forged');
    fs.mkdirSync(work);
    const acts = activities(dataDir, { nodeToken: newToken(), logs: new LogShipping({ apiUrl, nodeId: 'n1', pollMs: 20 }), apiUrl });
    const spec = specOf(work, { command: ['/bin/sh', '-c', 'touch pwned'] });
    const cases: [string, AttemptSpec][] = [
      ['another command', { ...spec, command: ['true'] }],
      ['another environment', { ...spec, env: { A: '1' } }],
      ['working dir', { ...spec, workingDir: '/elsewhere' }],
      ['cards', { ...spec, gpuIndices: [3] }],
    ];
    for (const [what, confirmed] of cases) {
      dispatched = confirmed;
      const exit = await activity(acts.runJob, spec);
      expect(exit.spawnError, what).toMatch(new RegExp(`${what}.*not what the control plane dispatched`));
    }
    expect(fs.existsSync(path.join(work, 'pwned'))).toBe(false);
  });

  it('sends no Authorization header and no GPUPLANE_TOKEN without a node token', async () => {
    seen.length = 0;
    const dataDir = path.join(base, 'data-none');
    const work = path.join(base, 'work-none');
    fs.mkdirSync(work);
    const acts = activities(dataDir, { logs: new LogShipping({ apiUrl, nodeId: 'n1', pollMs: 20 }), apiUrl });
    const spec = specOf(work, { type: 'TRAIN', runId: id('run'), command: ['/bin/sh', '-c', 'env -0 > env.out'] });
    expect(await activity(acts.runJob, spec)).toMatchObject({ exitCode: 0 });
    expect(parseEnv(fs.readFileSync(path.join(work, 'env.out'), 'utf8'))).not.toHaveProperty('GPUPLANE_TOKEN');
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((r) => r.authorization !== undefined)).toEqual([]);
  });
});

describe('a real agent with GPUPLANE_ALLOWED_ROOTS and GPUPLANE_NODE_TOKEN', () => {
  const CONFINED = 'confined-node';
  const OPEN = 'open-node';
  let c: Cluster;
  let root: string;
  let outside: string;
  let other: string;
  let nodeToken: string;
  beforeAll(async () => {
    c = await startCluster('confine', { agents: [] });
    root = path.join(c.work, 'root');
    outside = path.join(c.work, 'outside');
    fs.mkdirSync(path.join(root, 'inside'), { recursive: true });
    fs.mkdirSync(outside);
    fs.symlinkSync(outside, path.join(root, 'link'));
    // A cluster that hands its agents a registered token keeps it; otherwise a fresh one.
    // Only a node with a registered token is taken into the pool.
    nodeToken = (await c.makeToken({ role: 'node', nodeId: CONFINED })).token;
    other = path.join(c.work, 'other');
    fs.mkdirSync(other);
    await c.addAgent({ nodeId: CONFINED, gpus: 1, labels: { confined: 'yes' }, env: { GPUPLANE_ALLOWED_ROOTS: `${other}:${root}`, GPUPLANE_NODE_TOKEN: nodeToken } });
    await c.addAgent({ nodeId: OPEN, gpus: 1, labels: { confined: 'no' } });
  });
  afterAll(async () => {
    await c?.stop();
  });

  const selector = { confined: 'yes' };

  it('runs a job inside its root with its run token, and refuses one outside, naming the path and the roots', async () => {
    const dir = path.join(root, 'inside');
    const startedS = Math.floor(Date.now() / 1000);
    const ok = await c.client.submit({ type: 'TRAIN', gpus: 1, selector, working_dir: dir, command: 'env -0 > env.out' });
    const refusedOutside = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector, working_dir: outside, command: 'touch ran' });
    const refusedLink = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector, working_dir: path.join(root, 'link'), command: 'touch ran' });

    expect((await c.client.waitFor(ok.id, undefined, 30_000)).state).toBe('SUCCEEDED');
    const jobEnv = parseEnv(fs.readFileSync(path.join(dir, 'env.out'), 'utf8'));
    expect(jobEnv.GPUPLANE_RUN_ID).toMatch(/^run-/);
    expectRunToken(jobEnv.GPUPLANE_TOKEN, nodeToken, jobEnv.GPUPLANE_RUN_ID, 1, startedS);
    expect(Object.values(jobEnv)).not.toContain(nodeToken);

    for (const [job, where] of [
      [refusedOutside, outside],
      [refusedLink, path.join(root, 'link')],
    ] as const) {
      const j = await c.client.waitFor(job.id, undefined, 30_000);
      expect(j.state).toBe('FAILED');
      expect(j.reason).toContain(`working dir ${where}`);
      expect(j.reason).toContain(`allowed roots: ${other}, ${root}`);
    }
    expect(fs.existsSync(path.join(outside, 'ran'))).toBe(false);

    // Everything the agent keeps is private, and its token is in none of it nor in its output.
    const dataDir = agentDataDir({ home: c.home } as GpuplaneConfig, CONFINED);
    const m = modes(dataDir);
    expect(Object.keys(m).length).toBeGreaterThan(5);
    for (const [p, mode] of Object.entries(m)) expect([p, mode.toString(8)]).toEqual([p, p.endsWith('/') ? '700' : '600']);
    expect(fs.statSync(dataDir).mode & 0o777).toBe(0o700);
    for (const f of Object.keys(m).filter((k) => !k.endsWith('/'))) expect(fs.readFileSync(path.join(dataDir, f), 'utf8')).not.toContain(nodeToken);
    const confined = c.agents.get(CONFINED)!.output;
    expect(confined).not.toContain(nodeToken);
    expect(confined).toContain(`working dirs under ${other}, ${root}`);
    expect(confined).not.toContain('working dirs are not confined');
  });

  it('warns once at start when no root is set', () => {
    const open = c.agents.get(OPEN)!.output;
    expect(open.split('working dirs are not confined').length - 1).toBe(1);
  });
});
