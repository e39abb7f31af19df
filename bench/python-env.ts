/**
 * bench/python-env: a job's Python environment on its node (issue 45, docs/environments.md), by
 * the agent's own path (activities/gpu-host/python-env.ts EnvCache.prepare: probe, build as the
 * build user, read-only, ready marker) against the same environment made by hand with the same uv
 * (`uv venv && uv pip install -r`), in one run.
 *
 *   node --import tsx bench/python-env.ts [--rounds 5 --warm 200 --packages numpy==2.3.5,... --out FILE]
 *
 * cold: each round, GPUPlane's build into an empty node cache and the by-hand build into an
 * empty folder, each with an empty uv cache of its own (nothing downloaded before), alternating
 * which goes first; the packages come from a folder of real wheels (pip-downloaded once into
 * ~/.cache/gpuplane/wheels) given to both as UV_FIND_LINKS with UV_NO_INDEX, so the figures are
 * uv's and the agent's work, not the network's. warm: `prepare` of an environment already built
 * (what every later attempt on the node pays before its process starts), `--warm` times.
 *
 * Figures to stdout and to `--out` (JSON, default bench/results/python-env-<date>.json).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { EnvCache } from '../activities/gpu-host/python-env.ts';
import type { PythonEnv } from '../domain/python-env.ts';
import { copyRealWheel, uvBinaryIn } from '../test/support/python-wheels.ts';
import { runMain } from './run-main.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    warm: { type: 'string', default: '200' },
    packages: { type: 'string', default: 'numpy==2.3.5' },
    out: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const WARM = Number(args.warm);
const PACKAGES = args.packages.split(',').map((p) => p.trim());
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const say = (s: string) => process.stdout.write(`${s}\n`);
const note = (s: string) => process.stderr.write(`${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync('/var/tmp/gpuplane-bench-pyenv-');
  // The build user reads the wheels and runs uv from here.
  fs.chmodSync(tmp, 0o755);
  const wheels = path.join(tmp, 'wheels');
  fs.mkdirSync(wheels, { mode: 0o755 });
  for (const p of PACKAGES) copyRealWheel(p, PYTHON, wheels);
  const uv = uvBinaryIn(path.join(tmp, 'bin'));
  const uvVersion = execFileSync(uv, ['--version'], { encoding: 'utf8' }).trim();
  const text = `${PACKAGES.join('\n')}\n`;
  const env: PythonEnv = { kind: 'requirements', text, sha256: createHash('sha256').update(text).digest('hex') };
  const req = path.join(tmp, 'requirements.txt');
  fs.writeFileSync(req, text, { mode: 0o644 });
  const index = { UV_FIND_LINKS: wheels, UV_NO_INDEX: '1' };
  const user = process.getuid?.() === 0 ? 'nobody (the build user)' : 'this user';
  note(`python env of ${PACKAGES.join(', ')}; ${uvVersion}; Python ${PYTHON}; GPUPlane builds as ${user}; ${ROUNDS} cold rounds, ${WARM} warm`);

  const gpuplane = async (round: number): Promise<number> => {
    const cache = new EnvCache(path.join(tmp, `node-cache-${round}`), { uv, python: PYTHON, buildUser: 'nobody' }, { ...process.env, ...index });
    const t0 = performance.now();
    const r = await cache.prepare(env, async () => undefined);
    const ms = performance.now() - t0;
    if ('problem' in r) throw new Error(r.problem);
    return ms;
  };
  const byHand = (round: number): number => {
    const dir = path.join(tmp, `by-hand-${round}`);
    const vars = { ...process.env, ...index, UV_CACHE_DIR: path.join(tmp, `by-hand-uv-cache-${round}`), UV_LINK_MODE: 'copy', UV_NO_PROGRESS: '1' };
    const t0 = performance.now();
    for (const argv of [
      ['venv', '--quiet', '--python', PYTHON, dir],
      ['pip', 'install', '--quiet', '--python', path.join(dir, 'bin', 'python'), '-r', req],
    ]) {
      const r = spawnSync(uv, argv, { env: vars, stdio: ['ignore', 'ignore', 'pipe'] });
      if (r.status !== 0) throw new Error(`uv ${argv[0]} failed: ${r.stderr.toString()}`);
    }
    return performance.now() - t0;
  };

  const cold: { round: number; gpuplane_ms: number; by_hand_ms: number; first: string }[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const first = round % 2 === 0 ? 'gpuplane' : 'by-hand';
      let g = 0;
      let h = 0;
      if (first === 'gpuplane') {
        g = await gpuplane(round);
        h = byHand(round);
      } else {
        h = byHand(round);
        g = await gpuplane(round);
      }
      cold.push({ round, gpuplane_ms: g, by_hand_ms: h, first });
      note(`cold round ${round + 1}/${ROUNDS}: GPUPlane ${(g / 1000).toFixed(2)} s, by hand ${(h / 1000).toFixed(2)} s (${(g / h).toFixed(2)}×)`);
    }
    // Warm: the environment of round 0 is built; every later attempt pays this before its process starts.
    const warmCache = new EnvCache(path.join(tmp, 'node-cache-0'), { uv, python: PYTHON, buildUser: 'nobody' }, { ...process.env, ...index });
    await warmCache.prepare(env, async () => undefined);
    const warm: number[] = [];
    for (let i = 0; i < WARM; i++) {
      const t0 = performance.now();
      await warmCache.prepare(env, async () => undefined);
      warm.push(performance.now() - t0);
    }
    const g = median(cold.map((c) => c.gpuplane_ms));
    const h = median(cold.map((c) => c.by_hand_ms));
    const ratios = cold.map((c) => c.gpuplane_ms / c.by_hand_ms);
    say('');
    say(`| cold start of ${PACKAGES.join(', ')} (median of ${ROUNDS}) | seconds | ratio |`);
    say('|---|---|---|');
    say(`| GPUPlane (EnvCache.prepare, as ${user}) | **${(g / 1000).toFixed(2)}** (${cold.map((c) => (c.gpuplane_ms / 1000).toFixed(2)).join(', ')}) | **${(g / h).toFixed(2)}×** (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')}) |`);
    say(`| by hand (uv venv && uv pip install -r) | ${(h / 1000).toFixed(2)} (${cold.map((c) => (c.by_hand_ms / 1000).toFixed(2)).join(', ')}) | 1.00× |`);
    say('');
    say(`warm start, prepare of a built environment (${WARM} times): p50 ${median(warm).toFixed(2)} ms, p99 ${quantile(warm, 0.99).toFixed(2)} ms, max ${Math.max(...warm).toFixed(2)} ms`);
    const out = args.out ?? path.join('bench', 'results', `python-env-${new Date().toISOString().slice(0, 10)}.json`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    fs.writeFileSync(out, `${JSON.stringify({ at: new Date().toISOString(), load, packages: PACKAGES, uv: uvVersion, python: PYTHON, build_user: user, cold, cold_median_ratio: g / h, warm_ms: { p50: median(warm), p99: quantile(warm, 0.99), max: Math.max(...warm) } }, null, 2)}\n`);
    note(`figures in ${out}`);
  } finally {
    execFileSync('chmod', ['-R', 'u+w', tmp]);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

runMain(main);
