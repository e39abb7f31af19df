/**
 * An attempt's config: what a job runs with, snapshotted per attempt so that retries can be
 * compared, and the edit that retry_job applies to the previous one to make the next.
 */
import type { CodeSnapshot } from './code-snapshot.ts';
import type { PythonEnv } from './python-env.ts';
import { placementSelector } from './container-image.ts';

export interface AttemptConfig {
  command: string[];
  workingDir: string;
  env: Record<string, string>;
  /** Cards on each node. */
  gpus: number;
  /** Nodes the job spans (a gang when > 1); absent in attempts recorded before gangs: 1. */
  nodes?: number;
  selector: Record<string, string>;
  priority: number;
  params: Record<string, unknown>;
  /** MiB of RAM on each node (domain/memory-limit.ts); absent: no limit (and in attempts recorded before limits). */
  memoryMb?: number;
  /** The code snapshot it runs (domain/code-snapshot.ts), unpacked into workingDir; absent: none. */
  code?: CodeSnapshot;
  /** The Python environment its node builds with uv and runs it in (domain/python-env.ts); absent: none. */
  pythonEnv?: PythonEnv;
  /** The OCI image its node's container runtime runs the command in (domain/container-image.ts); absent: none, a plain process. */
  image?: string;
}

export interface RetryPatch {
  command?: string[];
  workingDir?: string;
  gpus?: number;
  nodes?: number;
  selector?: Record<string, string>;
  priority?: number;
  /** A new memory limit; null: none. */
  memoryMb?: number | null;
  /** Merged into the previous attempt's env / params. */
  env?: Record<string, string>;
  params?: Record<string, unknown>;
  /** A new code snapshot to run, with workingDir its copy's (codeWorkingDir); absent: the previous one, unless workingDir is given. */
  code?: CodeSnapshot;
  /** A new Python environment; null: none; absent: the previous one. */
  pythonEnv?: PythonEnv | null;
  /** A new container image; null: none (a plain process); absent: the previous one. */
  image?: string | null;
}

export function applyPatch(prev: AttemptConfig, p: RetryPatch): AttemptConfig {
  const memoryMb = p.memoryMb === null ? undefined : (p.memoryMb ?? prev.memoryMb);
  // New code runs in its own copy; a working dir given alone runs the job there, leaving its code behind.
  const code = p.code ?? (p.workingDir === undefined ? prev.code : undefined);
  const pythonEnv = p.pythonEnv === null ? undefined : (p.pythonEnv ?? prev.pythonEnv);
  const image = p.image === null ? undefined : (p.image ?? prev.image);
  return {
    command: p.command ?? prev.command,
    workingDir: p.workingDir ?? prev.workingDir,
    gpus: p.gpus ?? prev.gpus,
    nodes: p.nodes ?? prev.nodes ?? 1,
    // An image runs only where a runtime is, whatever selector a retry gives.
    selector: placementSelector(p.selector ?? prev.selector, image),
    priority: p.priority ?? prev.priority,
    env: { ...prev.env, ...p.env },
    params: { ...prev.params, ...p.params },
    // Absent rather than undefined: the config is stored as JSON and compared key by key.
    ...(memoryMb !== undefined ? { memoryMb } : {}),
    ...(code ? { code } : {}),
    ...(pythonEnv ? { pythonEnv } : {}),
    ...(image ? { image } : {}),
  };
}

export interface ConfigChange {
  key: string;
  from: unknown;
  to: unknown;
}

function flatten(c: AttemptConfig): Map<string, string> {
  const out = new Map<string, string>();
  // An attempt recorded before gangs spans one node, as one recorded since with nodes: 1.
  for (const [k, v] of Object.entries({ ...c, nodes: c.nodes ?? 1 })) {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const [kk, vv] of Object.entries(v as Record<string, unknown>)) {
        // A Python environment is named by its hash: its whole text in a retry's detail says nothing more.
        if (k !== 'pythonEnv' || kk !== 'text') out.set(`${k}.${kk}`, JSON.stringify(vv));
      }
    } else out.set(k, JSON.stringify(v));
  }
  return out;
}

/** What changed from one attempt's config to the next, key by key (params.lr, gpus, env.X...). */
export function diffConfigs(a: AttemptConfig, b: AttemptConfig): ConfigChange[] {
  const fa = flatten(a);
  const fb = flatten(b);
  const keys = [...new Set([...fa.keys(), ...fb.keys()])].sort();
  const parse = (s: string | undefined) => (s === undefined ? null : (JSON.parse(s) as unknown));
  return keys.filter((k) => fa.get(k) !== fb.get(k)).map((k) => ({ key: k, from: parse(fa.get(k)), to: parse(fb.get(k)) }));
}
