/**
 * How a node calls uv to build a job's Python environment (python-env.ts, docs/environments.md):
 * the environment a build runs with, a command run as the build user, what uv installs for each
 * kind of file, and a failed build's reason in one line.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { requirementsProblem, type PythonEnv } from '../../domain/python-env.ts';
import { pylockRequirementsOf, standaloneProject } from '../../runtime/python-env-files.ts';

/** Who a command runs as: the build user where the agent is root, else the agent (null). */
export type Who = { uid: number; gid: number } | null;

/** The largest package list an event carries: a `uv pip freeze` of any real environment is far smaller. */
export const MAX_FREEZE_BYTES = 256 * 1024;

export interface RunResult {
  code: number | null;
  /** stdout and stderr together, the last 64 KiB. */
  out: string;
  /** stdout alone, the first MAX_FREEZE_BYTES. */
  stdout: string;
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

/** The last lines of a build's output, in one line (a failed attempt's reason): uv wraps its messages, so they are joined by spaces. */
export function lastLines(out: string, n = 6): string {
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-n)
    .join(' ');
}

/**
 * What uv installs, as a requirements file's text: the requirements.txt as given; a pylock.toml's
 * packages at their locked versions and hashes; a uv project's lock as `uv export --frozen` (run
 * as the build user, in a folder of its own with the two files, the project made a workspace
 * root of its own) writes it. Either way from the
 * node's package index, and checked again as a requirements file (no options, no local paths).
 */
export async function requirementsToInstall(env: PythonEnv, req: string, vars: Record<string, string>, who: Who, uv: string, stop?: AbortSignal): Promise<string> {
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
    const r = await runAs(uv, ['export', '--frozen', '--no-emit-workspace', '--no-header', '--quiet', '--format', 'requirements-txt', '--project', project, '-o', out], vars, who, project, stop);
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

/**
 * Runs a command (as `who` where given): its exit, its stdout and stderr together, and its stdout
 * alone. In a process group of its own: `stop` kills the group (uv and the build backends it runs).
 */
export function runAs(cmd: string, args: string[], env: Record<string, string>, who: Who, cwd: string, stop?: AbortSignal): Promise<RunResult> {
  return new Promise((resolve) => {
    if (stop?.aborted) return resolve({ code: null, out: 'stopped', stdout: '' });
    const child = spawn(cmd, args, { cwd, detached: true, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(who ? { uid: who.uid, gid: who.gid } : {}) });
    const kill = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    };
    stop?.addEventListener('abort', kill, { once: true });
    child.once('close', () => stop?.removeEventListener('abort', kill));
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
