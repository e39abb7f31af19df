import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvCache } from '../activities/gpu-host/python-env.ts';
import type { NodeEnvsJson } from '../cli/client.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { gpuctlIn } from './support/gpuctl-cli.ts';
import { until } from './support/poll.ts';
import { removeEnvTree, uvBinaryIn, writeDemoWheels, writeFileIn } from './support/python-wheels.ts';

const NODE = 'uv-bound';
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * The bound of a node's cache of Python environments (issue 45), through a real cluster: an agent
 * whose cache holds one environment and a half (measured first), two files built in turn. The
 * least recently used goes to make room, never one a running job uses, and `gpuctl node envs`
 * shows what the node holds, in use or not.
 */
describe('the bounded Python environment cache of a node', () => {
  let c: Cluster;
  let env: NodeJS.ProcessEnv;
  const tmp = fs.mkdtempSync('/var/tmp/gpuplane-envbound-e2e-');
  const wheels = path.join(tmp, 'wheels');
  const cacheDir = path.join(tmp, 'env-cache');
  const ONE = 'gpuplane_demo==1.0\n';
  const TWO = 'gpuplane_demo==2.0\n';

  beforeAll(async () => {
    fs.chmodSync(tmp, 0o755);
    writeDemoWheels(wheels, 'gpuplane_demo', ['1.0', '2.0']);
    const uv = uvBinaryIn(path.join(tmp, 'bin'));
    const uvEnv = { UV_FIND_LINKS: wheels, UV_NO_INDEX: '1' };
    // One environment's size, as the node measures it: the bound is one and a half of it.
    const probe = new EnvCache(path.join(tmp, 'probe'), { uv, python: PYTHON, buildUser: 'nobody' }, { ...process.env, ...uvEnv });
    const built = await probe.prepare({ kind: 'requirements', text: ONE, sha256: sha256(ONE) }, async () => undefined);
    expect(built).toHaveProperty('dir');
    const size = probe.list()[0].bytes;
    const agentEnv = { GPUPLANE_UV: uv, GPUPLANE_ENV_PYTHON: PYTHON, GPUPLANE_ENV_CACHE_DIR: cacheDir, GPUPLANE_ENV_CACHE_SIZE: `${Math.floor(size * 1.5)}B`, ...uvEnv };
    c = await startCluster('envbound', { agents: [{ nodeId: NODE, gpus: 2, env: agentEnv }] });
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
  const succeeded = async (id: string) => {
    const done = await c.client.waitFor(id, undefined, 60_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
  };
  const envs = async () => {
    const r = await gpuctlIn(env, ['node', 'envs', NODE, '--json']);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as NodeEnvsJson;
  };
  /** What the node reports, as [file hash, attempts in it], once it is `want`. */
  const held = (want: [string, number][]) =>
    until(`node envs ${JSON.stringify(want)}`, async () => {
      const r = await envs();
      const got = r.envs.map((e) => [e.sha256, e.in_use]);
      return JSON.stringify(got) === JSON.stringify(want) ? r : null;
    }, 20_000);

  it('keeps the environment a running job uses past the bound, evicts the least recently used one to make room, and gpuctl node envs lists what is there', async () => {
    // A job runs in 1.0 until told to stop.
    const go = path.join(tmp, 'go');
    const a = await submit(['--python-env', file('one.txt', ONE), '--', 'sh', '-c', `python -m gpuplane_demo; while [ ! -e ${go} ]; do sleep 0.1; done`]);
    await held([[sha256(ONE), 1]]);
    // 2.0 is built beside it: both past the bound, and 1.0 (the older) stays, in use; 2.0 goes once its job ended.
    await succeeded(await submit(['--python-env', file('two.txt', TWO), '--', 'python', '-m', 'gpuplane_demo']));
    await held([[sha256(ONE), 1]]);
    const [oneKey] = (await envs()).envs.map((e) => e.key);
    expect(fs.existsSync(path.join(cacheDir, oneKey, 'bin', 'python'))).toBe(true);
    await until('2.0 gone from the disk', () => (fs.readdirSync(cacheDir).filter((n) => !n.startsWith('.')).join(' ') === [oneKey, `${oneKey}.freeze.txt`, `${oneKey}.ready`].sort().join(' ')) || null, 10_000);
    // Its job ends: 1.0 fits alone and stays, unused.
    fs.writeFileSync(go, '');
    await succeeded(a);
    const after = await held([[sha256(ONE), 0]]);
    expect(after.total_bytes).toBeLessThanOrEqual(after.bound_bytes!);
    expect(after.envs[0]).toMatchObject({ kind: 'requirements', key: oneKey, built_at: expect.any(String), last_used_at: expect.any(String) });
    // 2.0 again: built, and 1.0, unused and least recently used, makes room; the job's events say so.
    const b = await submit(['--python-env', file('two-again.txt', TWO), '--', 'python', '-m', 'gpuplane_demo']);
    await succeeded(b);
    await held([[sha256(TWO), 0]]);
    expect(fs.existsSync(path.join(cacheDir, oneKey))).toBe(false);
    expect(fs.existsSync(path.join(cacheDir, `${oneKey}.ready`))).toBe(false);
    expect(fs.existsSync(path.join(cacheDir, `${oneKey}.freeze.txt`))).toBe(false);
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${b}/events`)).events.map((e) => e.message);
    expect(events).toContainEqual(expect.stringMatching(new RegExp(`evicted the least recently used: ${sha256(ONE).slice(0, 12)} \\(`)));
    expect(c.agents.get(NODE)!.output).toMatch(/python envs: evicted 1 least recently used/);

    // The table for people; an unknown node in one line.
    const table = await gpuctlIn(env, ['node', 'envs', NODE]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^node ${NODE}: 1 Python environment\\(s\\), .* of .* \\(--env-cache-size\\)`));
    expect(table.stdout).toMatch(/KEY\s+KIND\s+SHA256\s+SIZE\s+BUILT\s+LAST USED\s+IN USE/);
    expect(table.stdout).toContain(sha256(TWO).slice(0, 12));
    const unknown = await gpuctlIn(env, ['node', 'envs', 'no-such-node']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    expect(unknown.stderr).toMatch(/node no-such-node not found/);
  });
});
