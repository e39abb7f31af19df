import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InvalidArgumentError } from 'commander';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { EnvCache } from '../activities/gpu-host/python-env.ts';
import { envCacheSizeArg } from '../cli/args.ts';
import type { PythonEnv } from '../domain/python-env.ts';
import { DEFAULT_ENV_CACHE_BYTES, envsToEvict, formatBytes, parseEnvCacheSize } from '../domain/env-cache.ts';
import { gpuctlIn } from './support/gpuctl-cli.ts';
import { until } from './support/poll.ts';
import { uvBinaryIn } from './support/python-wheels.ts';

const K = 1024;
const G = 1024 ** 3;

/**
 * A folder the build user can traverse (nobody, where this runs as root), as the agent's cache is:
 * not a mkdtemp folder (0700). Removed when the test ends, after the build user's read-only folders are made writable.
 */
function buildUserTmp(name: string): string {
  const base = `/tmp/gpuplane-env-${name}-${randomBytes(4).toString('hex')}`;
  fs.mkdirSync(base, { mode: 0o755 });
  fs.chmodSync(base, 0o755);
  onTestFinished(() => {
    execFileSync('chmod', ['-R', 'u+w', base]);
    fs.rmSync(base, { recursive: true, force: true });
  });
  return base;
}

/** The bound of a node's cache of Python environments (issue 45): its size option, and which go when it is past it. */
describe('the bound of the Python environment cache', () => {
  it('reads sizes with binary units, a bare number as GiB, B as bytes; refuses the rest', () => {
    expect(parseEnvCacheSize('50')).toBe(50 * G);
    expect(parseEnvCacheSize('20G')).toBe(20 * G);
    expect(parseEnvCacheSize('20GiB')).toBe(20 * G);
    expect(parseEnvCacheSize('20gb')).toBe(20 * G);
    expect(parseEnvCacheSize('500M')).toBe(500 * K * K);
    expect(parseEnvCacheSize('1.5T')).toBe(1.5 * 1024 * G);
    expect(parseEnvCacheSize('64K')).toBe(64 * K);
    expect(parseEnvCacheSize('4096B')).toBe(4096);
    expect(parseEnvCacheSize('0.5')).toBe(G / 2);
    expect(parseEnvCacheSize('0')).toBe(0);
    for (const bad of ['', 'G', '-1G', '5X', '5 GB extra', '1e3', '2048T', 'lots']) expect(parseEnvCacheSize(bad), bad).toBeNull();
    expect(DEFAULT_ENV_CACHE_BYTES).toBe(50 * G);
    expect(() => envCacheSizeArg('--env-cache-size')('5X')).toThrow(InvalidArgumentError);
    expect(() => envCacheSizeArg('--env-cache-size')('5X')).toThrow(/^--env-cache-size must be a size like 50G, 500M or 2T .*; got "5X"$/);
    expect([formatBytes(0), formatBytes(812), formatBytes(3 * K), formatBytes(1.5 * G), formatBytes(120 * G)]).toEqual(['0 B', '812 B', '3.0 KiB', '1.5 GiB', '120 GiB']);
  });

  it('evicts least recently used first until the rest fits, never one kept (in use, being built)', () => {
    const envs = [
      { key: 'a', bytes: 40, lastUsedMs: 1000 },
      { key: 'b', bytes: 30, lastUsedMs: 3000 },
      { key: 'c', bytes: 20, lastUsedMs: 2000 },
      { key: 'd', bytes: 10, lastUsedMs: 4000 },
    ];
    const none = new Set<string>();
    expect(envsToEvict(envs, none, 100)).toEqual([]);
    expect(envsToEvict(envs, none, 99)).toEqual(['a']);
    expect(envsToEvict(envs, none, 40)).toEqual(['a', 'c']);
    expect(envsToEvict(envs, none, 0)).toEqual(['a', 'c', 'b', 'd']);
    // The oldest is in use: the next oldest go instead, as many as it takes.
    expect(envsToEvict(envs, new Set(['a']), 60)).toEqual(['c', 'b']);
    // What is kept may be past the bound on its own: everything else goes, and no more.
    expect(envsToEvict(envs, new Set(['a', 'b']), 50)).toEqual(['c', 'd']);
    expect(envsToEvict(envs, new Set(['a', 'b', 'c', 'd']), 0)).toEqual([]);
    // A tie goes by key: the same choice every time.
    expect(envsToEvict([{ key: 'y', bytes: 5, lastUsedMs: 1 }, { key: 'x', bytes: 5, lastUsedMs: 1 }], none, 5)).toEqual(['x']);
  });

  describe('on disk (folders made to look built, no uv)', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-env-bound-'));
    afterAll(() => {
      execFileSync('chmod', ['-R', 'u+w', root]);
      fs.rmSync(root, { recursive: true, force: true });
    });
    const hex = (c: string) => c.repeat(64);
    /** A read-only environment folder of `kib` KiB and its marker, last used `agoS` seconds ago. */
    const fake = (c: string, kib: number, agoS: number) => {
      const dir = path.join(root, hex(c));
      fs.mkdirSync(path.join(dir, 'bin'), { recursive: true });
      fs.writeFileSync(path.join(dir, 'bin', 'python'), '');
      fs.writeFileSync(path.join(dir, 'blob'), Buffer.alloc(kib * K, 1));
      execFileSync('chmod', ['-R', 'a-w', dir]);
      const marker = path.join(root, `${hex(c)}.ready`);
      fs.writeFileSync(marker, JSON.stringify({ sha256: hex(c === 'a' ? 'e' : c), built_at: '2026-12-01T00:00:00.000Z' }));
      const t = new Date(Date.now() - agoS * 1000);
      fs.utimesSync(marker, t, t);
    };

    it('measures what was built before sizes were, keeps what an adopted attempt holds, and removes the rest markers first', async () => {
      fake('a', 64, 300);
      fake('b', 64, 200);
      fake('c', 64, 100);
      const logs: string[] = [];
      let changes = 0;
      const cache = new EnvCache(root, { uv: '/nonexistent/uv', python: 'python3', buildUser: 'nobody' }, {}, { maxBytes: 150 * K, onChange: () => void changes++, log: (m) => void logs.push(m) });
      const listed = cache.list();
      expect(listed.map((e) => e.key).sort()).toEqual([hex('a'), hex('b'), hex('c')]);
      for (const e of listed) expect(e).toMatchObject({ kind: 'requirements', builtAt: '2026-12-01T00:00:00.000Z', inUse: 0, bytes: expect.any(Number) });
      expect(listed.every((e) => e.bytes >= 64 * K && e.bytes < 100 * K)).toBe(true);
      // The sizes measured went into the markers, the last uses (their mtimes) untouched.
      expect(JSON.parse(fs.readFileSync(path.join(root, `${hex('a')}.ready`), 'utf8'))).toMatchObject({ bytes: expect.any(Number), kind: 'requirements' });
      expect(Date.now() - Date.parse(listed.find((e) => e.key === hex('a'))!.lastUsedAt)).toBeGreaterThan(250_000);

      // An adopted attempt runs in a (file e), the least recently used: b goes, then c fits with a.
      let end!: () => void;
      cache.holdWhile({ sha256: hex('e') }, new Promise<void>((r) => (end = r)));
      expect(cache.list().find((e) => e.key === hex('a'))!.inUse).toBe(1);
      const gone = await cache.evict();
      expect(gone.map((e) => e.key)).toEqual([hex('b')]);
      expect(fs.existsSync(path.join(root, hex('b')))).toBe(false);
      expect(fs.existsSync(path.join(root, `${hex('b')}.ready`))).toBe(false);
      expect(cache.list().map((e) => e.key).sort()).toEqual([hex('a'), hex('c')]);
      expect(logs.join('\n')).toMatch(/evicted 1 least recently used \(bbbbbbbbbbbb \d+(\.\d)? KiB\) to keep the cache within 150 KiB/);
      expect(changes).toBeGreaterThan(0);

      // Given back, a was used last: past the bound again (a new one), c goes and a stays.
      fake('d', 64, 50);
      end();
      await until('c evicted', () => !fs.existsSync(path.join(root, hex('c'))) || null, 5000);
      expect(cache.list().map((e) => [e.key, e.inUse])).toEqual(expect.arrayContaining([[hex('a'), 0], [hex('d'), 0]]));
      expect(cache.list()).toHaveLength(2);
    });
  });

  it("clears uv's download cache before evicting any environment once the two are past the bound, measured again only after a build", async () => {
    const base = buildUserTmp('trim');
    const uv = uvBinaryIn(path.join(base, 'bin'));
    const root = path.join(base, 'envs');
    const env = path.join(root, 'e'.repeat(64));
    fs.mkdirSync(path.join(env, 'bin'), { recursive: true });
    fs.writeFileSync(path.join(env, 'bin', 'python'), '');
    fs.writeFileSync(path.join(env, 'blob'), Buffer.alloc(64 * K, 1));
    fs.writeFileSync(path.join(root, `${'e'.repeat(64)}.ready`), JSON.stringify({ sha256: 'f'.repeat(64), built_at: '2026-12-01T00:00:00.000Z' }));
    // What uv's earlier builds downloaded, as the build user's.
    const downloads = path.join(root, '.build-home', 'cache');
    fs.mkdirSync(path.join(downloads, 'wheels-v5'), { recursive: true });
    fs.writeFileSync(path.join(downloads, 'wheels-v5', 'a.whl'), Buffer.alloc(200 * K, 2));
    if (process.getuid?.() === 0) execFileSync('chown', ['-R', 'nobody:', path.join(root, '.build-home')]);
    const logs: string[] = [];
    const cache = new EnvCache(root, { uv, python: 'python3', buildUser: 'nobody' }, {}, { maxBytes: 150 * K, log: (m) => void logs.push(m) });

    expect(await cache.evict()).toEqual([]);
    expect(fs.existsSync(path.join(downloads, 'wheels-v5', 'a.whl'))).toBe(false);
    expect(cache.list().map((e) => e.key)).toEqual(['e'.repeat(64)]);
    expect(logs.join('\n')).toMatch(/cleared uv's download cache \(\d+(\.\d)? KiB\) to keep the cache within 150 KiB; the environments held \d+(\.\d)? KiB/);
    // Within the bound, or with no build since it was measured: left alone.
    fs.mkdirSync(path.join(downloads, 'wheels-v5'), { recursive: true });
    fs.writeFileSync(path.join(downloads, 'wheels-v5', 'b.whl'), Buffer.alloc(200 * K, 3));
    await cache.evict();
    expect(fs.existsSync(path.join(downloads, 'wheels-v5', 'b.whl'))).toBe(true);
    const roomy = new EnvCache(root, { uv, python: 'python3', buildUser: 'nobody' }, {}, { maxBytes: 1024 * K, log: (m) => void logs.push(m) });
    await roomy.evict();
    expect(fs.existsSync(path.join(downloads, 'wheels-v5', 'b.whl'))).toBe(true);
    expect(logs.filter((l) => l.includes('cleared'))).toHaveLength(1);
  });

  it("two agents sharing one cache folder build an environment once: the second waits for the first's lock, says so, and gets the same folder", async () => {
    const base = buildUserTmp('lock');
    const installs = path.join(base, 'installs');
    fs.writeFileSync(installs, '');
    fs.chmodSync(installs, 0o666);
    // A uv that makes a venv of the system's Python and whose install waits until the test says go.
    const uv = path.join(base, 'uv');
    fs.writeFileSync(
      uv,
      `#!/bin/sh
case "$1" in
  --version) echo "uv 0.0.0 (fake)" ;;
  venv) for a; do d=$a; done; mkdir -p "$d/bin" && ln -s "$(command -v python3)" "$d/bin/python" ;;
  pip) case "$2" in
    install) echo "$$" >> ${installs}; while [ ! -e ${base}/go ]; do sleep 0.05; done ;;
    freeze) echo "gpuplane-demo==1.0" ;;
  esac ;;
esac
`,
      { mode: 0o755 },
    );
    const tools = { uv, python: 'python3', buildUser: 'nobody' };
    const root = path.join(base, 'cache');
    const text = 'gpuplane-demo==1.0\n';
    const env: PythonEnv = { kind: 'requirements', text, sha256: createHash('sha256').update(text).digest('hex') };
    const notes: string[][] = [[], []];
    const agents = [new EnvCache(root, tools, {}), new EnvCache(root, tools, {})];
    const prepared = Promise.all(agents.map((a, i) => a.prepare(env, async (m) => void notes[i].push(m))));
    await until("one agent's attempt waiting for the other's build", () => notes.flat().some((m) => m.includes("is being built or removed by another agent sharing this node's cache")) || null, 10_000);
    fs.writeFileSync(path.join(base, 'go'), '');
    const [a, b] = await prepared;
    expect(a, notes.flat().join('\n')).toEqual(b);
    expect('dir' in a && fs.existsSync(path.join(a.dir, 'bin', 'python'))).toBe(true);
    // One install, by the agent that took the lock; the other found it built.
    expect(fs.readFileSync(installs, 'utf8').trim().split('\n')).toHaveLength(1);
    expect(notes.flat().filter((m) => m.includes(' built with '))).toHaveLength(1);
    expect(notes.flat().filter((m) => m.includes("built by another agent sharing this node's cache"))).toHaveLength(1);
    // Its lock is free again: an eviction (a bound of 0) takes it, and removes it.
    const gone = await new EnvCache(root, tools, {}, { maxBytes: 0 }).evict();
    expect(gone.map((e) => e.key)).toEqual(['key' in a ? a.key : '']);
  });

  it('gpuctl agent refuses a bad --env-cache-size (and GPUPLANE_ENV_CACHE_SIZE) in one line', async () => {
    for (const [args, env] of [
      [['agent', '--node-id', 'n1', '--no-token', '--env-cache-size', '5X'], {}],
      [['agent', '--node-id', 'n1', '--no-token'], { GPUPLANE_ENV_CACHE_SIZE: 'lots' }],
    ] as const) {
      const r = await gpuctlIn({ ...process.env, ...env }, [...args]);
      expect(r.code).not.toBe(0);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/--env-cache-size must be a size like 50G, 500M or 2T/);
    }
  });
});
