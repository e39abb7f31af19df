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
import { PYTHON_ENV_FILES, pythonEnvDigestText, pythonEnvKey, requirementsProblem, type PythonEnv } from '../../domain/python-env.ts';
import { pylockRequirementsOf, pythonEnvProblem, standaloneProject } from '../../runtime/python-env-files.ts';

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

/** An attempt's event; `data` names the environment it runs in (pythonEnvData) once it is ready. */
type Note = (message: string, level: 'info' | 'warning', data?: Record<string, unknown>) => Promise<void>;

/** The largest package list an event carries: a `uv pip freeze` of any real environment is far smaller. */
const MAX_FREEZE_BYTES = 256 * 1024;
interface Target {
  python: string;
  platform: string;
  uv: string;
}
interface RunResult {
  code: number | null;
  /** stdout and stderr together, the last 64 KiB. */
  out: string;
  /** stdout alone, the first MAX_FREEZE_BYTES. */
  stdout: string;
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

/** The environments of this node: where they are, how they are built, and the builds in progress. */
export class EnvCache {
  private target: Promise<Target> | null = null;
  private readonly building = new Map<string, Promise<void>>();

  constructor(
    private readonly root: string,
    private readonly tools: EnvTools = envToolsFromEnv(),
    private readonly agentEnv: NodeJS.ProcessEnv = process.env,
  ) {}

  /**
   * Makes the attempt's environment ready: its folder (venvVars), or why not in one line. Says in the attempt's events whether
   * it built the environment (and how long it took), found it built, or waited for another
   * attempt's build.
   */
  async prepare(env: PythonEnv, note: Note): Promise<{ dir: string } | { problem: string }> {
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
        await note(`python env ${short} (${PYTHON_ENV_FILES[env.kind]}) is in this node's cache at ${dir} (Python ${target.python}, ${target.uv})`, 'info', this.data(env, key, target)).catch(() => undefined);
        return { dir };
      }
      const other = this.building.get(key);
      if (other) {
        await note(`python env ${short} is being built by another attempt on this node: waiting for it`, 'info').catch(() => undefined);
        await other;
        await note(`python env ${short} built by another attempt, ready at ${dir} after ${took()}`, 'info', this.data(env, key, target)).catch(() => undefined);
        return { dir };
      }
      const build = this.build(env, key, dir);
      this.building.set(key, build);
      try {
        await build;
      } finally {
        this.building.delete(key);
      }
      await note(`python env ${short} (${PYTHON_ENV_FILES[env.kind]}) built with ${target.uv} for Python ${target.python} into ${dir} in ${took()}`, 'info', this.data(env, key, target)).catch(() => undefined);
      return { dir };
    } catch (err) {
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
    try {
      const vars = uvBuildEnv(this.agentEnv, home);
      fs.writeFileSync(req, await this.requirements(env, req, vars, who), { mode: 0o644 });
      const venv = await this.run(this.tools.uv, ['venv', '--quiet', '--allow-existing', '--python', this.tools.python, dir], vars, who, home);
      if (venv.code !== 0) throw new Error(`uv venv failed: ${lastLines(venv.out) || `exit ${venv.code}`}`);
      const install = await this.run(this.tools.uv, ['pip', 'install', '--python', path.join(dir, 'bin', 'python'), '-r', req], vars, who, home);
      if (install.code !== 0) throw new Error(lastLines(install.out) || `uv pip install: exit ${install.code}`);
      // What was installed, as the run records it: uv's own list, asked of the environment's Python.
      const freeze = await this.run(this.tools.uv, ['pip', 'freeze', '--python', path.join(dir, 'bin', 'python')], vars, who, home);
      if (freeze.code !== 0) throw new Error(`uv pip freeze failed: ${lastLines(freeze.out) || `exit ${freeze.code}`}`);
      fs.writeFileSync(this.freezeFile(key), freeze.stdout.slice(0, MAX_FREEZE_BYTES), { mode: 0o644 });
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

  /**
   * What uv installs, as a requirements file's text: the requirements.txt as given; a pylock.toml's
   * packages at their locked versions and hashes; a uv project's lock as `uv export --frozen` (run
   * as the build user, in a folder of its own with the two files, the project made a workspace
   * root of its own) writes it. Either way from the
   * node's package index, and checked again as a requirements file (no options, no local paths).
   */
  private async requirements(env: PythonEnv, req: string, vars: Record<string, string>, who: { uid: number; gid: number } | null): Promise<string> {
    if (env.kind === 'requirements') return env.text;
    if (env.kind === 'pylock') {
      const r = pylockRequirementsOf(env.text);
      if ('problem' in r) throw new Error(r.problem);
      return r.text;
    }
    const project = `${req}.project`;
    fs.mkdirSync(project, { mode: 0o755 });
    try {
      // A workspace root of its own: uv looks for no workspace (and no lock) in the folders above.
      fs.writeFileSync(path.join(project, 'pyproject.toml'), standaloneProject(env.pyproject ?? ''), { mode: 0o644 });
      fs.writeFileSync(path.join(project, 'uv.lock'), env.text, { mode: 0o644 });
      const out = path.join(project, 'requirements.txt');
      if (who) fs.chownSync(project, who.uid, who.gid);
      const r = await this.run(this.tools.uv, ['export', '--frozen', '--no-emit-workspace', '--no-header', '--quiet', '--format', 'requirements-txt', '--project', project, '-o', out], vars, who, project);
      if (r.code !== 0) throw new Error(`uv export --frozen of the uv.lock failed: ${lastLines(r.out) || `exit ${r.code}`}`);
      const text = fs.readFileSync(out, 'utf8');
      const refused = requirementsProblem(text);
      if (refused === 'names no package') return '# the uv.lock names no package beside its project\n';
      if (refused) throw new Error(`uv.lock, exported as requirements, ${refused}`);
      return text;
    } finally {
      fs.rmSync(project, { recursive: true, force: true });
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
      let stdout = '';
      const take = (d: Buffer) => {
        // The tail is what is kept: a build that says a lot does not grow the agent.
        out = (out + d.toString()).slice(-64 * 1024);
      };
      child.stdout.on('data', (d: Buffer) => {
        if (stdout.length < MAX_FREEZE_BYTES) stdout += d.toString();
        take(d);
      });
      child.stderr.on('data', take);
      child.once('error', (err) => resolve({ code: null, out: `${out}${err.message}`, stdout }));
      child.once('close', (code) => resolve({ code, out, stdout }));
    });
  }
}
