import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvCache } from '../activities/gpu-host/python-env.ts';
import { latestBuiltPythonEnv, packageDiff, type PythonEnv } from '../domain/python-env.ts';
import { artifactRoot } from '../web/src/artifacts.ts';
import type { Run, RunEvent } from '../web/src/types.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { gpuctlIn } from './support/gpuctl-cli.ts';
import { until } from './support/poll.ts';
import { copyRealWheel, removeEnvTree, uvBinaryIn, writeDemoWheels, writeFileIn, writeSlowSdist } from './support/python-wheels.ts';

const NODE = 'uv-a';
// The system's Python where there is one: the build user (nobody, where the agent is root) may not reach a Python under root's home.
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/**
 * Python environments built by the node (issue 45): `gpuctl submit --python-env requirements.txt`,
 * built with the pinned uv (scripts/uv-venv.sh) from a folder of two tiny wheels of one package
 * (UV_FIND_LINKS, UV_NO_INDEX: no index, no internet), once per content on a node, into a cache
 * every job with the same file shares read-only.
 */
describe('Python environments built with uv on the node', () => {
  let c: Cluster;
  let env: NodeJS.ProcessEnv;
  const tmp = fs.mkdtempSync('/var/tmp/gpuplane-uvenv-e2e-');
  const wheels = path.join(tmp, 'wheels');
  const cacheDir = path.join(tmp, 'env-cache');
  let uv: string;

  beforeAll(async () => {
    // Readable by the build user: it reads the wheels and runs uv from here.
    fs.chmodSync(tmp, 0o755);
    writeDemoWheels(wheels, 'gpuplane_demo', ['1.0', '2.0']);
    // The example job's one package (examples/requirements-train.txt), a real wheel.
    copyRealWheel('numpy==2.3.5', PYTHON, wheels);
    // A package whose build takes a minute: an attempt cancelled during it.
    writeSlowSdist(wheels, 'gpuplane_slow', '1.0', 60);
    uv = uvBinaryIn(path.join(tmp, 'bin'));
    const agentEnv = { GPUPLANE_UV: uv, GPUPLANE_ENV_PYTHON: PYTHON, GPUPLANE_ENV_CACHE_DIR: cacheDir, UV_FIND_LINKS: wheels, UV_NO_INDEX: '1' };
    c = await startCluster('uvenv', { agents: [{ nodeId: NODE, gpus: 3, env: agentEnv }] });
    env = { ...c.env, GPUPLANE_API_URL: c.apiUrl, GPUPLANE_TOKEN: c.token };
  });
  afterAll(async () => {
    await c?.stop();
    removeEnvTree(tmp);
  });

  const file = (name: string, text: string) => writeFileIn(tmp, name, text);
  const submit = async (args: string[]) => {
    const r = await gpuctlIn(env, ['submit', '--type', 'CUSTOM', '--gpus', '1', ...args]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim().split('\n').pop()!;
  };
  const logOf = async (jobId: string) => (await fetch(`${c.apiUrl}/api/v1/jobs/${jobId}/logs`, { headers: c.auth })).text();
  const envEvents = async (jobId: string) => (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${jobId}/events`)).events.filter((e) => e.kind === 'env.built').map((e) => e.message);
  const logWith = (jobId: string, text: string) =>
    until(`${text} in ${jobId}'s log`, async () => {
      const got = await logOf(jobId);
      return got.includes(text) ? got : null;
    }, 15_000);
  const PRINT = 'python -m gpuplane_demo; echo "venv=$VIRTUAL_ENV python=$(command -v python)"';

  it('two jobs with the same requirements build it once and both run in that one read-only environment; a job pinning the other version sees its own', async () => {
    const one = file('one.txt', 'gpuplane_demo==1.0\n');
    const [a, b, v2] = await Promise.all([submit(['--python-env', one, '--', 'sh', '-c', PRINT]), submit(['--python-env', one, '--', 'sh', '-c', PRINT]), submit(['--python-env', file('two.txt', 'gpuplane_demo==2.0\n'), '--', 'sh', '-c', PRINT])]);
    for (const id of [a, b, v2]) {
      const done = await c.client.waitFor(id, undefined, 60_000);
      expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    }
    const venvOf = (log: string) => /venv=(\S+) python=(\S+)/.exec(log)!;
    const [logA, logB, log2] = [await logWith(a, 'venv='), await logWith(b, 'venv='), await logWith(v2, 'venv=')];
    expect(logA).toContain('gpuplane_demo 1.0');
    expect(logB).toContain('gpuplane_demo 1.0');
    expect(log2).toContain('gpuplane_demo 2.0');
    const [, venv, python] = venvOf(logA);
    expect(venvOf(logB)[1]).toBe(venv);
    expect(python).toBe(`${venv}/bin/python`);
    expect(path.dirname(venv)).toBe(cacheDir);
    expect(venvOf(log2)[1]).not.toBe(venv);
    // Read-only for everybody, and readable by every job; built as nobody where the agent is root.
    expect(fs.statSync(venv).mode & 0o777).toBe(0o555);
    if (process.getuid?.() === 0) expect(fs.statSync(path.join(venv, 'pyvenv.cfg')).uid).toBe(Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' })));
    // One build of the shared file: the other attempt waited for it, or found it built.
    const events = [...(await envEvents(a)), ...(await envEvents(b))];
    expect(events.filter((m) => / built with uv \d+\.\d+\.\d+ for Python [\d.]+ into .* in [\d.]+ s$/.test(m))).toHaveLength(1);
    expect(events.filter((m) => /is being built by another attempt on this node: waiting for it|is in this node's cache at/.test(m))).toHaveLength(1);
    const shown = await gpuctlIn(env, ['job', a]);
    expect(shown.stdout).toMatch(/python_env:\s+requirements [0-9a-f]{12} \(19 bytes\)/);
  });

  it('a retry runs in the environment of the attempt before, from the cache', async () => {
    const id = await submit(['--python-env', file('retry.txt', 'gpuplane_demo==2.0\n# retried\n'), '--', 'sh', '-c', `${PRINT}; test "$GPUPLANE_ATTEMPT" = 2`]);
    expect((await c.client.waitFor(id, undefined, 60_000)).state).toBe('FAILED');
    const r = await gpuctlIn(env, ['retry', id]);
    expect(r.code, r.stderr).toBe(0);
    const done = await c.client.waitFor(id, undefined, 60_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(await logWith(id, 'gpuplane_demo 2.0')).toBeTruthy();
    const events = await envEvents(id);
    expect(events).toHaveLength(2);
    expect(events[0]).toMatch(/ built with uv /);
    expect(events[1]).toMatch(/is in this node's cache at /);
  });

  it("a package that does not exist fails the attempt FAILED, uv's message its reason, in one line of gpuctl job", async () => {
    const id = await submit(['--python-env', file('missing.txt', 'gpuplane_demo==1.0\nno-such-package-gpuplane\n'), '--', 'true']);
    const done = await c.client.waitFor(id, undefined, 60_000);
    expect(done.state).toBe('FAILED');
    expect(done.attempts).toHaveLength(1);
    const reason = done.attempts.at(-1)!.reason ?? '';
    expect(reason).toMatch(/^the job's Python environment [0-9a-f]{12} could not be built: .*no-such-package-gpuplane was not found/);
    expect(reason).not.toContain('\n');
    const shown = await gpuctlIn(env, ['job', id]);
    expect(shown.stdout.split('\n').filter((l) => l.includes('no-such-package-gpuplane was not found'))).toHaveLength(1);
    // Nothing left that a later attempt could take for an environment.
    expect(fs.readdirSync(cacheDir, { withFileTypes: true }).filter((d) => d.isDirectory() && !d.name.startsWith('.'))).toHaveLength(3);
  });

  it('gpuctl refuses a pyproject.toml without its uv.lock, a file with options, or a missing file in one line, before sending anything', async () => {
    const cases: [string, RegExp][] = [
      [file('lone/pyproject.toml', '[project]\nname = "x"\n'), /pyproject\.toml: no uv\.lock beside it \(`uv lock` makes one\)/],
      [file('opts.txt', '--index-url http://elsewhere/simple\ngpuplane_demo\n'), /line 1: options are not taken \(--index-url\)/],
      [path.join(tmp, 'nope.txt'), /no such file/],
    ];
    for (const [f, want] of cases) {
      const r = await gpuctlIn(env, ['submit', '--python-env', f, '--', 'true']);
      expect(r.code).not.toBe(0);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(want);
    }
  });

  it('two builds of one environment at once on a node: one builds, the other waits and says so', async () => {
    const cache = new EnvCache(path.join(tmp, 'direct-cache'), { uv, python: PYTHON, buildUser: 'nobody' }, { ...process.env, UV_FIND_LINKS: wheels, UV_NO_INDEX: '1' });
    const text = 'gpuplane_demo==1.0\n# direct\n';
    const want: PythonEnv = { kind: 'requirements', text, sha256: createHash('sha256').update(text).digest('hex') };
    const notes: string[][] = [[], []];
    const got = await Promise.all(notes.map((n) => cache.prepare(want, async (m) => void n.push(m))));
    expect(got[0]).toEqual(got[1]);
    expect(notes[0]).toEqual([expect.stringMatching(/ built with uv /)]);
    expect(notes[1]).toEqual([expect.stringMatching(/is being built by another attempt on this node: waiting for it$/), expect.stringMatching(/built by another attempt, ready at .* after [\d.]+ s$/)]);
  });

  it("a uv project's uv.lock (named inside --code) and a pylock.toml build from the node's own index; a lock naming a local folder fails in one line", async () => {
    // A real uv project, locked by uv against the wheels, and its lock exported as a pylock.toml by uv.
    const project = path.join(tmp, 'project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'pyproject.toml'), '[project]\nname = "trainer"\nversion = "0.1.0"\nrequires-python = ">=3.8"\ndependencies = ["gpuplane_demo==2.0"]\n');
    const uvEnv = { ...process.env, UV_FIND_LINKS: wheels, UV_NO_INDEX: '1', UV_CACHE_DIR: path.join(tmp, 'uv-cache'), UV_PYTHON: PYTHON };
    execFileSync(uv, ['lock', '--quiet', '--project', project], { env: uvEnv });
    const pylock = path.join(tmp, 'pylock.toml');
    execFileSync(uv, ['export', '--quiet', '--frozen', '--no-emit-project', '--format', 'pylock.toml', '--project', project, '-o', pylock], { env: uvEnv });
    // A path dependency: gpuctl cannot tell without uv, the node's `uv export` names it, and the attempt fails with that.
    const withPath = path.join(tmp, 'with-path');
    fs.mkdirSync(path.join(withPath, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(withPath, 'sub', 'pyproject.toml'), '[project]\nname = "sub"\nversion = "0.1.0"\n');
    fs.writeFileSync(path.join(withPath, 'pyproject.toml'), '[project]\nname = "trainer"\nversion = "0.1.0"\ndependencies = ["sub"]\n[tool.uv.sources]\nsub = { path = "sub" }\n');
    execFileSync(uv, ['lock', '--quiet', '--project', withPath], { env: uvEnv });
    // Planted above the node's cache (as in /var/tmp, which anyone may write): a pyproject.toml uv would read as a workspace, were the job's project not a root of its own.
    fs.writeFileSync(path.join(tmp, 'pyproject.toml'), '[project]\nname = "planted"\n');
    const [locked, pinned] = await Promise.all([submit(['--code', project, '--python-env', 'uv.lock', '--', 'sh', '-c', PRINT]), submit(['--python-env', pylock, '--', 'sh', '-c', PRINT])]);
    for (const id of [locked, pinned]) {
      const done = await c.client.waitFor(id, undefined, 60_000);
      expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
      expect(await logWith(id, 'gpuplane_demo 2.0')).toBeTruthy();
    }
    expect((await gpuctlIn(env, ['job', locked])).stdout).toMatch(/python_env:\s+uv-lock [0-9a-f]{12} /);
    expect((await gpuctlIn(env, ['job', pinned])).stdout).toMatch(/python_env:\s+pylock [0-9a-f]{12} /);
    const bad = await submit(['--python-env', path.join(withPath, 'pyproject.toml'), '--', 'true']);
    const failed = await c.client.waitFor(bad, undefined, 60_000);
    expect(failed.state).toBe('FAILED');
    expect(failed.attempts.at(-1)!.reason).toMatch(/could not be built: uv\.lock, exported as requirements, line \d+: a local path is not taken \(\.\/sub\)/);
  });

  it("the example job runs in examples/requirements-train.txt's environment: train_ckpt.py with numpy from it", async () => {
    const repo = path.resolve('.');
    const r = await gpuctlIn(env, [
      ...['submit', '--type', 'TRAIN', '--project', 'envs', '--gpus', '1', '--code', path.join(repo, 'examples'), '--python-env', 'requirements-train.txt', '--watch', 'ckpts'],
      ...['--env', `PYTHONPATH=${path.join(repo, 'sdk/python')}`, '--param', 'steps=4', '--param', 'every=2', '--param', 'chunk_sleep=0'],
      ...['--', 'sh', '-c', 'python -c "import numpy; print(\'numpy\', numpy.__version__, numpy.__file__)" && python train_ckpt.py --out ckpts'],
    ]);
    expect(r.code, r.stderr).toBe(0);
    const id = r.stdout.trim().split('\n').pop()!;
    const done = await c.client.waitFor(id, undefined, 90_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    const log = await logWith(id, 'numpy 2.3.5');
    expect(log).toMatch(new RegExp(`numpy 2\\.3\\.5 ${cacheDir}/[0-9a-f]{64}/lib/python3\\.\\d+/site-packages/numpy/__init__\\.py`));
    // The run records its environment: uv pip freeze's list in its env.built event, and as its artifact gpuplane/python-env.txt.
    const job = await c.client.job(id);
    const runId = job.attempts.at(-1)!.run_id!;
    const events = (await c.client.request<{ events: RunEvent[] }>('GET', `/runs/${runId}/events`)).events;
    const built = latestBuiltPythonEnv(events);
    expect(built).toMatchObject({ kind: 'requirements', python: expect.stringMatching(/^3\.\d+\.\d+$/), uv: expect.stringMatching(/^uv 0\.9\.5/) });
    expect(built!.packages).toMatch(/^numpy==2\.3\.5$/m);
    const run = await c.client.request<Run>('GET', `/runs/${runId}`);
    let last = '';
    const file = await until('the python-env artifact', async () => {
      const r = await fetch(`${c.apiUrl}/mlflow/api/2.0/mlflow-artifacts/artifacts/${artifactRoot(run)}/gpuplane/python-env.txt`, { headers: c.auth });
      last = `${r.status} ${await r.clone().text()}`;
      return r.ok ? r.text() : null;
    }, 10_000).catch((err: Error) => {
      throw new Error(`${err.message}: ${last}`);
    });
    expect(file).toMatch(/^# python_env requirements [0-9a-f]{64}, built by its node with uv 0\.9\.5/);
    expect(file).toMatch(/^numpy==2\.3\.5$/m);
    // The console's diff against another run's list names what differs.
    expect(packageDiff('numpy==2.1.3\nsix==1.16.0\n', built!.packages!)).toEqual([{ name: 'numpy', from: '2.1.3', to: '2.3.5' }, { name: 'six', from: '1.16.0', to: null }]);
  });

  it('a job cancelled while its environment builds ends CANCELLED at once, nothing started, and the build nobody waits for is stopped', async () => {
    const id = await submit(['--python-env', file('slow.txt', 'gpuplane_slow==1.0\n'), '--', 'sh', '-c', 'echo started']);
    // The build is under way: uv's build backend for the sdist runs as the build user.
    const building = () => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes('slow_backend') || l.includes('gpuplane_slow'));
    await until('the slow build running', async () => (building().length > 0 ? true : null), 30_000);
    const asked = Date.now();
    const r = await gpuctlIn(env, ['cancel', id]);
    expect(r.code, r.stderr).toBe(0);
    const done = await c.client.waitFor(id, undefined, 30_000);
    expect(done.state).toBe('CANCELLED');
    expect(Date.now() - asked).toBeLessThan(15_000);
    expect(done.attempts[0].started_at ?? null).toBeNull();
    expect(await logOf(id)).not.toContain('started');
    // Nobody else waits for it: uv and its build backend are gone, and nothing is left that a later attempt could take for the environment.
    await until('the build stopped', async () => (building().length === 0 ? true : null), 10_000);
    const events = (await envEvents(id)).join('\n');
    expect(events).toMatch(/the attempt was cancelled during the build; the build was stopped/);
  });
});
