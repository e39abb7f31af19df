/**
 * A job's Python environment on the node that runs an attempt of it (issue 45,
 * docs/environments.md). Before the process starts, right after its code, the agent makes sure the
 * environment is in the node's cache: built once per content hash, Python version, platform and uv
 * version (domain/python-env.ts pythonEnvKey) with uv, as nobody's job (the `nobody` user where the
 * agent is root, in a folder that user owns), from the package index the agent is configured with
 * (its own UV_* variables, never the job's), then made read-only and world-readable. Every job with
 * the same key runs in that one folder: its bin first on PATH, VIRTUAL_ENV naming it. Two attempts
 * on one node that need the same environment build it once: the second waits for the first.
 */
import { spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pythonEnvKey, requirementsProblem, type PythonEnv } from '../../domain/python-env.ts';
import { DEFAULT_ENV_CACHE_BYTES, formatBytes, type NodeEnvEntry } from '../../domain/env-cache.ts';
import { cachedEnvs, evictLeastRecentlyUsed, EnvUses, recordBuilt, type EnvCacheBound } from './env-cache-book.ts';

/** Where a node keeps the environments it built (GPUPLANE_ENV_CACHE_DIR): readable by every job. */
export function envCacheDirFromEnv(nodeId: string, env = process.env): string {
  return env.GPUPLANE_ENV_CACHE_DIR?.trim() || path.join('/var/tmp/gpuplane-env-cache', nodeId);
}

/** The tools a node builds with: uv (GPUPLANE_UV, `uv` on PATH) and the Python it builds for (GPUPLANE_ENV_PYTHON, `python3`); the user it builds as where the agent is root (GPUPLANE_ENV_BUILD_USER, nobody). */
export interface EnvTools {
  uv: string;
  python: string;
  buildUser: string;
}

export function envToolsFromEnv(env = process.env): EnvTools {
  return { uv: env.GPUPLANE_UV?.trim() || 'uv', python: env.GPUPLANE_ENV_PYTHON?.trim() || 'python3', buildUser: env.GPUPLANE_ENV_BUILD_USER?.trim() || 'nobody' };
}

/** uv's variables that say where it finds nothing of the build's own (its cache, its Python, its config): never passed on. */
const UV_KEPT_BACK = new Set(['UV_CACHE_DIR', 'UV_PYTHON', 'UV_PROJECT_ENVIRONMENT', 'UV_CONFIG_FILE', 'UV_NO_CONFIG', 'UV_TOOL_DIR', 'UV_TOOL_BIN_DIR', 'UV_PYTHON_INSTALL_DIR', 'UV_SYSTEM_PYTHON', 'UV_BREAK_SYSTEM_PACKAGES', 'UV_LINK_MODE']);
const NETWORK = /^(https?_proxy|no_proxy|all_proxy|HTTPS?_PROXY|NO_PROXY|ALL_PROXY|SSL_CERT_FILE|SSL_CERT_DIR)$/;

/**
 * The environment a build runs with: the agent's package index and network settings (UV_INDEX_URL,
 * UV_FIND_LINKS, UV_NO_INDEX…, proxies, certificates), nothing of any job's. No Python download
 * unless the agent says so, no config file of the build user's, and files copied (not linked) out
 * of uv's cache, so the environment shares no inode with it.
 */
export function uvBuildEnv(agentEnv: NodeJS.ProcessEnv, home: string): Record<string, string> {
  const out: Record<string, string> = { PATH: agentEnv.PATH ?? '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: home, UV_CACHE_DIR: path.join(home, 'cache'), UV_NO_CONFIG: '1', UV_LINK_MODE: 'copy', UV_NO_PROGRESS: '1', UV_PYTHON_DOWNLOADS: 'never' };
  for (const [k, v] of Object.entries(agentEnv)) {
    if (v === undefined) continue;
    if ((k.startsWith('UV_') && !UV_KEPT_BACK.has(k)) || NETWORK.test(k)) out[k] = v;
  }
  return out;
}

/** What a process that runs in the environment `dir` gets: its bin first on PATH, VIRTUAL_ENV. */
export function venvVars(dir: string, jobPath: string | undefined): Record<string, string> {
  return { VIRTUAL_ENV: dir, PATH: `${path.join(dir, 'bin')}:${jobPath ?? '/usr/local/bin:/usr/bin:/bin'}` };
}

type Note = (message: string, level: 'info' | 'warning') => Promise<void>;
interface Target {
  python: string;
  platform: string;
  uv: string;
}
interface RunResult {
  code: number | null;
  out: string;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The last lines of a build's output, in one line (a failed attempt's reason): uv wraps its messages, so they are joined by spaces. */
export function lastLines(out: string, n = 6): string {
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-n)
    .join(' ');
}

/** The environments of this node: where they are, how they are built, the builds in progress, and which attempts use which. */
export class EnvCache {
  private target: Promise<Target> | null = null;
  private readonly building = new Map<string, Promise<void>>();
  /** Attempts running in each environment now (taken in prepare, given back by release): never evicted. */
  private readonly uses = new EnvUses(() => this.root, () => this.bound.onChange?.());
  /** Evictions under way: a build of the same key waits for its folder to be gone. */
  private readonly removing = new Map<string, Promise<void>>();

  constructor(
    private readonly root: string,
    private readonly tools: EnvTools = envToolsFromEnv(),
    private readonly agentEnv: NodeJS.ProcessEnv = process.env,
    private readonly bound: EnvCacheBound = {},
  ) {}

  /**
   * Makes the attempt's environment ready: its folder (venvVars), or why not in one line. Says in the attempt's events whether
   * it built the environment (and how long it took), found it built, or waited for another
   * attempt's build. The attempt holds the environment from then on (it is not evicted): give it
   * back with release(key) once its process ended.
   */
  async prepare(env: PythonEnv, note: Note): Promise<{ dir: string; key: string } | { problem: string }> {
    const started = Date.now();
    const took = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const short = env.sha256.slice(0, 12);
    try {
      // The spec is the control plane's word, checked all the same: a text under another's hash would put the wrong packages in that one's folder.
      if (sha256(env.text) !== env.sha256) throw new Error(`the file's text does not match its sha256 ${env.sha256}`);
      const refused = requirementsProblem(env.text);
      if (refused) throw new Error(`the requirements file ${refused}`);
      const target = await this.targetOnce();
      const key = pythonEnvKey(env, target, sha256);
      const dir = path.join(this.root, key);
      if (this.ready(key)) {
        this.uses.take(key);
        await note(`python env ${short} (requirements) is in this node's cache at ${dir} (Python ${target.python}, ${target.uv})`, 'info').catch(() => undefined);
        return { dir, key };
      }
      const other = this.building.get(key);
      if (other) {
        await note(`python env ${short} is being built by another attempt on this node: waiting for it`, 'info').catch(() => undefined);
        await other;
        this.uses.take(key);
        await note(`python env ${short} built by another attempt, ready at ${dir} after ${took()}`, 'info').catch(() => undefined);
        return { dir, key };
      }
      // An eviction of this very key still removing its folder: the build starts once it is gone.
      const build = (this.removing.get(key) ?? Promise.resolve()).then(() => this.build(env, key, dir));
      this.building.set(key, build);
      try {
        await build;
      } finally {
        this.building.delete(key);
      }
      recordBuilt(this.root, key, env.kind);
      this.uses.take(key);
      await note(`python env ${short} (requirements) built with ${target.uv} for Python ${target.python} into ${dir} in ${took()}`, 'info').catch(() => undefined);
      const gone = await this.evict();
      if (gone.length) await note(`to keep this node's environments within ${formatBytes(this.maxBytes)} (--env-cache-size), evicted the least recently used: ${gone.map((g) => `${g.sha256.slice(0, 12)} (${formatBytes(g.bytes)})`).join(', ')}`, 'info').catch(() => undefined);
      return { dir, key };
    } catch (err) {
      const why = `the job's Python environment ${short} could not be built: ${(err as Error).message.replace(/\s*\n\s*/g, ' ')}`;
      await note(why, 'warning').catch(() => undefined);
      return { problem: why };
    }
  }

  /** The cache's bound in bytes. */
  get maxBytes(): number {
    return this.bound.maxBytes ?? DEFAULT_ENV_CACHE_BYTES;
  }

  /** What it holds now, with how many attempts use each. */
  list(): NodeEnvEntry[] {
    return cachedEnvs(this.root, this.uses.counts);
  }

  /** An attempt's process ended: it gives its environment back (its last use is now), and the cache is brought within its bound. */
  release(key: string): void {
    this.uses.give(key);
    void this.evict();
  }

  /** An adopted attempt (the agent's previous life) holds, until `ended`, the environments built from its file, whatever Python they were built for: its key needs a probe the adoption does not wait for. */
  holdWhile(env: Pick<PythonEnv, 'sha256'>, ended: Promise<unknown>): void {
    const keys = this.list().flatMap((e) => (e.sha256 === env.sha256 ? [e.key] : []));
    keys.forEach((key) => this.uses.take(key));
    void ended.finally(() => keys.forEach((key) => this.release(key)));
  }

  /** Evicts the least recently used environments until the cache fits its bound, never one in use or being built (env-cache-book.ts). Returns what went; never throws. */
  async evict(): Promise<NodeEnvEntry[]> {
    const keep = new Set([...this.uses.counts.keys(), ...this.building.keys()]);
    const home = path.join(this.root, '.build-home');
    const gone = await evictLeastRecentlyUsed(() => this.list(), keep, this.maxBytes, { root: this.root, removing: this.removing, remove: (dir, who) => this.remove(dir, who, home), builder: () => this.builder(), log: this.bound.log });
    if (gone.length) this.bound.onChange?.();
    return gone;
  }

  private readyFile(key: string): string {
    return path.join(this.root, `${key}.ready`);
  }

  private ready(key: string): boolean {
    return fs.existsSync(this.readyFile(key)) && fs.existsSync(path.join(this.root, key, 'bin', 'python'));
  }

  /** The Python version, platform and uv version this node builds for: asked once. */
  private targetOnce(): Promise<Target> {
    this.target ??= this.probe().catch((err: unknown) => {
      this.target = null;
      throw err;
    });
    return this.target;
  }

  private async probe(): Promise<Target> {
    const uv = await this.run(this.tools.uv, ['--version'], {}, null, process.cwd());
    if (uv.code !== 0) throw new Error(`${this.tools.uv} --version failed (is uv installed? GPUPLANE_UV names it): ${lastLines(uv.out, 2) || `exit ${uv.code}`}`);
    const script = "import sys, sysconfig, platform; print('%d.%d.%d' % sys.version_info[:3]); print(sysconfig.get_platform() + '-' + '-'.join(platform.libc_ver()))";
    const py = await this.run(this.tools.python, ['-c', script], {}, null, process.cwd());
    if (py.code !== 0) throw new Error(`${this.tools.python} could not be asked its version (GPUPLANE_ENV_PYTHON names it): ${lastLines(py.out, 2) || `exit ${py.code}`}`);
    const [python, platform] = py.out.trim().split('\n');
    return { python, platform, uv: uv.out.trim().split('\n')[0] };
  }

  /** Who builds: the build user where the agent is root, else the agent itself (it cannot be anybody else). */
  private builder(): { uid: number; gid: number } | null {
    if (process.getuid?.() !== 0) return null;
    const id = (flag: string) => Number(execFileSync('id', [flag, this.tools.buildUser], { encoding: 'utf8' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  }

  /** Builds the environment `key` into `dir` as the build user, then makes it read-only and marks it ready. */
  private async build(env: PythonEnv, key: string, dir: string): Promise<void> {
    const who = this.builder();
    fs.mkdirSync(this.root, { recursive: true, mode: 0o755 });
    fs.chmodSync(this.root, 0o755);
    // The build user's own home and uv cache, kept between builds (it only ever holds packages).
    const home = path.join(this.root, '.build-home');
    fs.mkdirSync(home, { recursive: true, mode: 0o700 });
    if (who) fs.chownSync(home, who.uid, who.gid);
    // What a build that stopped half-way left (the agent was killed): made again from nothing.
    await this.remove(dir, who, home);
    fs.mkdirSync(dir, { mode: 0o755 });
    if (who) fs.chownSync(dir, who.uid, who.gid);
    const req = path.join(home, `requirements-${key.slice(0, 16)}-${randomBytes(4).toString('hex')}.txt`);
    fs.writeFileSync(req, env.text, { mode: 0o644 });
    try {
      const vars = uvBuildEnv(this.agentEnv, home);
      const venv = await this.run(this.tools.uv, ['venv', '--quiet', '--allow-existing', '--python', this.tools.python, dir], vars, who, home);
      if (venv.code !== 0) throw new Error(`uv venv failed: ${lastLines(venv.out) || `exit ${venv.code}`}`);
      const install = await this.run(this.tools.uv, ['pip', 'install', '--python', path.join(dir, 'bin', 'python'), '-r', req], vars, who, home);
      if (install.code !== 0) throw new Error(lastLines(install.out) || `uv pip install: exit ${install.code}`);
      // Read-only for everybody, the build user too; made so by that user, so nothing it planted is followed.
      const ro = await this.run('chmod', ['-R', 'a+rX,a-w', dir], {}, who, home);
      if (ro.code !== 0) throw new Error(`chmod of the environment failed: ${lastLines(ro.out)}`);
      fs.writeFileSync(this.readyFile(key), `${JSON.stringify({ sha256: env.sha256, built_at: new Date().toISOString() })}\n`, { mode: 0o644 });
    } catch (err) {
      // A failed build leaves nothing a later attempt could take for an environment.
      await this.remove(dir, who, home).catch(() => undefined);
      throw err;
    } finally {
      fs.rmSync(req, { force: true });
    }
  }

  /** Removes a folder of the build user's (made writable first, by that user: even root may not write into it here). */
  private async remove(dir: string, who: { uid: number; gid: number } | null, home: string): Promise<void> {
    if (!fs.existsSync(dir)) return;
    await this.run('chmod', ['-R', 'u+w', dir], {}, who, home);
    fs.rmSync(dir, { recursive: true, force: true });
  }

  /** Runs a command (as `who` where given), its stdout and stderr together. */
  private run(cmd: string, args: string[], env: Record<string, string>, who: { uid: number; gid: number } | null, cwd: string): Promise<RunResult> {
    return new Promise((resolve) => {
      const child = spawn(cmd, args, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(who ? { uid: who.uid, gid: who.gid } : {}) });
      let out = '';
      const take = (d: Buffer) => {
        // The tail is what is kept: a build that says a lot does not grow the agent.
        out = (out + d.toString()).slice(-64 * 1024);
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      child.once('error', (err) => resolve({ code: null, out: `${out}${err.message}` }));
      child.once('close', (code) => resolve({ code, out }));
    });
  }
}
