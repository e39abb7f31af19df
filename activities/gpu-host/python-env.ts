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
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PYTHON_ENV_FILES, pythonEnvDigestText, pythonEnvKey, type PythonEnv } from '../../domain/python-env.ts';
import { pythonEnvProblem } from '../../runtime/python-env-files.ts';
import { DEFAULT_ENV_CACHE_BYTES, formatBytes, type NodeEnvEntry } from '../../domain/env-cache.ts';
import { cachedEnvs, clearDownloadsPastBound, evictLeastRecentlyUsed, EnvUses, lockFileOf, recordBuilt, type EnvCacheBound } from './env-cache-book.ts';
import { lockFile } from './file-lock.ts';
import { BuildWaits, LeftTheBuild } from './env-build-waits.ts';
import { lastLines, MAX_FREEZE_BYTES, requirementsToInstall, runAs, uvBuildEnv } from './uv-run.ts';

export { lastLines, uvBuildEnv } from './uv-run.ts';

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

/** What a process that runs in the environment `dir` gets: its bin first on PATH, VIRTUAL_ENV. */
export function venvVars(dir: string, jobPath: string | undefined): Record<string, string> {
  return { VIRTUAL_ENV: dir, PATH: `${path.join(dir, 'bin')}:${jobPath ?? '/usr/local/bin:/usr/bin:/bin'}` };
}

/** An attempt's event; `data` names the environment it runs in (pythonEnvData) once it is ready. */
type Note = (message: string, level: 'info' | 'warning', data?: Record<string, unknown>) => Promise<void>;

interface Target {
  python: string;
  platform: string;
  uv: string;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The environments of this node: where they are, how they are built, the builds in progress, and which attempts use which. */
export class EnvCache {
  private target: Promise<Target> | null = null;
  /** Builds under way, each resolving to whether this agent built it (false: another agent sharing the folder did, buildLocked). */
  private readonly building = new Map<string, Promise<boolean>>();
  /** Attempts running in each environment now (taken in prepare, given back by release): never evicted. */
  private readonly uses = new EnvUses(() => this.root, () => this.bound.onChange?.());
  /** Evictions under way: a build of the same key waits for its folder to be gone. */
  private readonly removing = new Map<string, Promise<void>>();
  private readonly waits = new BuildWaits();
  /** Whether uv's download cache may have grown since it was measured (at start, after a build). */
  private downloadsGrew = true;

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
   * back with release(key) once its process ended. `cancel` (the attempt's cancel) stops the
   * wait for a build, and the build itself when no other attempt waits for it.
   */
  async prepare(env: PythonEnv, note: Note, cancel?: AbortSignal): Promise<{ dir: string; key: string } | { problem: string }> {
    const started = Date.now();
    const took = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const short = env.sha256.slice(0, 12);
    try {
      // The spec is the control plane's word, checked all the same: a text under another's hash would put the wrong packages in that one's folder.
      if (sha256(pythonEnvDigestText(env)) !== env.sha256) throw new Error(`the files' text does not match their sha256 ${env.sha256}`);
      const refused = pythonEnvProblem(env);
      if (refused) throw new Error(refused);
      const target = await this.targetOnce();
      const key = pythonEnvKey(env, target, sha256);
      const dir = path.join(this.root, key);
      if (this.ready(key)) {
        this.uses.take(key);
        await note(`python env ${short} (${PYTHON_ENV_FILES[env.kind]}) is in this node's cache at ${dir} (Python ${target.python}, ${target.uv})`, 'info', this.data(env, key, target)).catch(() => undefined);
        return { dir, key };
      }
      const other = this.building.get(key);
      if (other) {
        await note(`python env ${short} is being built by another attempt on this node: waiting for it`, 'info').catch(() => undefined);
        await this.waits.wait(key, other, cancel);
        this.uses.take(key);
        await note(`python env ${short} built by another attempt, ready at ${dir} after ${took()}`, 'info', this.data(env, key, target)).catch(() => undefined);
        return { dir, key };
      }
      // An eviction of this very key still removing its folder: the build starts once it is gone.
      const stop = this.waits.begin(key);
      const build = (this.removing.get(key) ?? Promise.resolve()).then(() => this.buildLocked(env, key, dir, stop, note));
      this.building.set(key, build);
      const done = () => {
        this.building.delete(key);
        this.waits.end(key);
      };
      void build.then(done, done);
      await this.waits.wait(key, build, cancel);
      if (!(await build)) {
        this.uses.take(key);
        await note(`python env ${short} built by another agent sharing this node's cache, ready at ${dir} after ${took()}`, 'info', this.data(env, key, target)).catch(() => undefined);
        return { dir, key };
      }
      recordBuilt(this.root, key, env.kind);
      this.downloadsGrew = true;
      this.uses.take(key);
      await note(`python env ${short} (${PYTHON_ENV_FILES[env.kind]}) built with ${target.uv} for Python ${target.python} into ${dir} in ${took()}`, 'info', this.data(env, key, target)).catch(() => undefined);
      const gone = await this.evict();
      if (gone.length) await note(`to keep this node's environments within ${formatBytes(this.maxBytes)} (--env-cache-size), evicted the least recently used: ${gone.map((g) => `${g.sha256.slice(0, 12)} (${formatBytes(g.bytes)})`).join(', ')}`, 'info').catch(() => undefined);
      return { dir, key };
    } catch (err) {
      if (err instanceof LeftTheBuild) {
        await note(`python env ${short}: the attempt was cancelled during the build; ${err.others ? `the build goes on for ${err.others} other attempt(s)` : 'the build was stopped'}`, 'info').catch(() => undefined);
        return { problem: 'cancelled while its Python environment was being built' };
      }
      const why = `the job's Python environment ${short} could not be built: ${(err as Error).message.replace(/\s*\n\s*/g, ' ')}`;
      await note(why, 'warning').catch(() => undefined);
      return { problem: why };
    }
  }

  /**
   * What the attempt's `env.built` event says of its environment (the run's record of it, and its
   * artifact `gpuplane/python-env.txt`, api/routes/launch.ts): the job's hash, the node's key, the
   * Python and uv it was built with, and the packages `uv pip freeze` listed after the build.
   */
  private data(env: PythonEnv, key: string, target: Target): Record<string, unknown> {
    let packages: string | null = null;
    try {
      packages = fs.readFileSync(this.freezeFile(key), 'utf8').slice(0, MAX_FREEZE_BYTES);
    } catch {
      // Built before the list was kept: the event names the environment all the same.
    }
    return { python_env: { kind: env.kind, sha256: env.sha256, key, python: target.python, platform: target.platform, uv: target.uv, packages } };
  }

  private freezeFile(key: string): string {
    return path.join(this.root, `${key}.freeze.txt`);
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

  /** Evicts the least recently used environments until the cache fits its bound, never one in use or being built, after uv's download cache (env-cache-book.ts). Returns what went; never throws. */
  async evict(): Promise<NodeEnvEntry[]> {
    if (this.downloadsGrew) {
      this.downloadsGrew = false;
      const home = path.join(this.root, '.build-home');
      await clearDownloadsPastBound({ home, envBytes: () => this.list().reduce((n, e) => n + e.bytes, 0), maxBytes: this.maxBytes, uv: this.tools.uv, env: uvBuildEnv(this.agentEnv, home), who: () => this.builder(), log: this.bound.log });
    }
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
    const uv = await runAs(this.tools.uv, ['--version'], {}, null, process.cwd());
    if (uv.code !== 0) throw new Error(`${this.tools.uv} --version failed (is uv installed? GPUPLANE_UV names it): ${lastLines(uv.out, 2) || `exit ${uv.code}`}`);
    const script = "import sys, sysconfig, platform; print('%d.%d.%d' % sys.version_info[:3]); print(sysconfig.get_platform() + '-' + '-'.join(platform.libc_ver()))";
    const py = await runAs(this.tools.python, ['-c', script], {}, null, process.cwd());
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

  /**
   * Builds the environment `key` under its lock (env-cache-book.ts lockFileOf), which another
   * agent sharing this cache folder holds while it builds or evicts that key: the attempt waits,
   * saying so, and then builds only where that agent did not. Returns whether this agent built it.
   */
  private async buildLocked(env: PythonEnv, key: string, dir: string, stop: AbortSignal, note: Note): Promise<boolean> {
    fs.mkdirSync(this.root, { recursive: true, mode: 0o755 });
    const file = lockFileOf(this.root, key);
    let lock = await lockFile(file, { wait: false });
    if (!lock) {
      await note(`python env ${env.sha256.slice(0, 12)} is being built or removed by another agent sharing this node's cache ${this.root}: waiting for it`, 'info').catch(() => undefined);
      lock = await lockFile(file, { signal: stop });
    }
    try {
      if (this.ready(key)) return false;
      await this.build(env, key, dir, stop);
      return true;
    } finally {
      await lock!.release();
    }
  }

  /** Builds the environment `key` into `dir` as the build user, then makes it read-only and marks it ready. */
  private async build(env: PythonEnv, key: string, dir: string, stop: AbortSignal): Promise<void> {
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
    try {
      const vars = uvBuildEnv(this.agentEnv, home);
      fs.writeFileSync(req, await requirementsToInstall(env, req, vars, who, this.tools.uv, stop), { mode: 0o644 });
      const venv = await runAs(this.tools.uv, ['venv', '--quiet', '--allow-existing', '--python', this.tools.python, dir], vars, who, home, stop);
      if (venv.code !== 0) throw new Error(`uv venv failed: ${lastLines(venv.out) || `exit ${venv.code}`}`);
      const install = await runAs(this.tools.uv, ['pip', 'install', '--python', path.join(dir, 'bin', 'python'), '-r', req], vars, who, home, stop);
      if (install.code !== 0) throw new Error(lastLines(install.out) || `uv pip install: exit ${install.code}`);
      // What was installed, as the run records it: uv's own list, asked of the environment's Python.
      const freeze = await runAs(this.tools.uv, ['pip', 'freeze', '--python', path.join(dir, 'bin', 'python')], vars, who, home, stop);
      if (stop.aborted) throw new Error('stopped: no attempt waits for it any more');
      if (freeze.code !== 0) throw new Error(`uv pip freeze failed: ${lastLines(freeze.out) || `exit ${freeze.code}`}`);
      fs.writeFileSync(this.freezeFile(key), freeze.stdout.slice(0, MAX_FREEZE_BYTES), { mode: 0o644 });
      // Read-only for everybody, the build user too; made so by that user, so nothing it planted is followed.
      const ro = await runAs('chmod', ['-R', 'a+rX,a-w', dir], {}, who, home);
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
    await runAs('chmod', ['-R', 'u+w', dir], {}, who, home);
    fs.rmSync(dir, { recursive: true, force: true });
  }

}
