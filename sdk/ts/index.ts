/**
 * GPUPlane's TypeScript SDK: log metrics and events of a run. Plain TypeScript on the global
 * fetch, no build step (run it with tsx, or Node's type stripping).
 *
 *   import * as gpuplane from './sdk/ts/index.ts';
 *   await gpuplane.init('vision', 'resnet', 'lr-3e-4', { lr: 3e-4 });
 *   gpuplane.log({ loss: 0.7 }, 0);
 *   gpuplane.event('checkpoint.saved', 'epoch 3', { path: '/ckpt/3' });
 *   await gpuplane.finish();
 *
 * Under a job (GPUPLANE_RUN_ID set) init() attaches to the job's run. The API and its token are
 * found as gpuctl finds them (sdk/ts/creds.ts): the options, else GPUPLANE_API_URL /
 * GPUPLANE_TOKEN, else what `gpuctl login` saved in the home, else `gpuctl up`'s admin token and
 * address. When the API stays away past the retry window, what it did not take is written to
 * <home>/offline-runs/*.jsonl for `gpuctl import-run`; GPUPLANE_MODE=offline writes only that
 * file. In a job of several processes (multi-node, torchrun) only global rank 0 sends: see
 * InitOptions.allRanks. See docs/sdk.md.
 */

import os from 'node:os';
import { findApi } from './creds.ts';
import { settingsFrom, type SdkSettings } from './encode.ts';
import { apiBase } from './http.ts';
import { offlineDir } from './offline.ts';
import { muted as isMuted } from './rank.ts';
import { Run, type EventLevel, type FinishStatus } from './run.ts';

export { Run, type EventLevel, type FinishStatus } from './run.ts';
export { ApiError, Unreachable } from './http.ts';
export type { SdkSettings } from './encode.ts';

export const VERSION = '0.1.0';

export interface InitOptions {
  /**
   * Default: GPUPLANE_API_URL, else the address `gpuctl login` saved (<home>/api-url), else
   * http://127.0.0.1:8787 (GPUPLANE_API_HOST / GPUPLANE_API_PORT, as `gpuctl up`). With or
   * without /api/v1.
   */
  apiUrl?: string;
  /**
   * The API token, sent as `Authorization: Bearer <token>` and never printed. Default:
   * GPUPLANE_TOKEN (under a job the agent sets it to the run's token), else <home>/token
   * (`gpuctl login`), else <home>/admin-token (`gpuctl up`); the home is GPUPLANE_HOME, else
   * ~/.gpuplane, and is not read under a job. Without one the API answers 401 and init() throws.
   */
  token?: string;
  /** 'offline' sends nothing and writes the run to a local JSONL file for `gpuctl import-run`. Default: GPUPLANE_MODE, else 'online'. */
  mode?: 'online' | 'offline';
  /**
   * Under a job of several processes (a multi-node job's members, torchrun's workers) they all
   * share the job's run and only global rank 0 sends: where the rank (RANK, which torchrun sets,
   * else GPUPLANE_NODE_RANK) is above 0 the run is muted (`run.muted`): log(), event() and
   * finish() return at once and nothing is sent. true makes every rank send to the run (give
   * each rank its own keys then). Default: GPUPLANE_LOG_ALL_RANKS=1, else false.
   */
  allRanks?: boolean;
  tags?: Record<string, string>;
  /** Where GPUPLANE_* come from (default process.env). */
  env?: Record<string, string | undefined>;
  /** Overrides of the GPUPLANE_SDK_* settings. */
  settings?: Partial<SdkSettings>;
  /** Finish the run on the process's 'beforeExit' when the program did not (default true). */
  autoFinish?: boolean;
  /** Where warnings go (default: process.emitWarning, so once to stderr). */
  warn?: (msg: string) => void;
}

let current: Run | null = null;
const exitHooks = new Map<Run, () => void>();

/** The run the module-level functions use: the last one init() made. */
export function currentRun(): Run | null {
  return current;
}

/**
 * Starts (or, under a job, attaches to) a run and makes it the current one. Under a job
 * `project` and `experiment` are the job's; `params` (and `name`, `tags`) are merged into its run.
 * Otherwise the run registers with source "sdk" and `project` is required.
 *
 * Throws ApiError when the API refuses the run: a 4xx such as an invalid project, 401 (no or
 * unknown token) or 403 (a token without write access to the project). A 401/403 later on stops
 * the run's sending with one warning; log() goes on without throwing.
 */
export async function init(project?: string, experiment?: string, name?: string, params?: Record<string, unknown>, opts: InitOptions = {}): Promise<Run> {
  if (current) await finish();
  const env = opts.env ?? process.env;
  const settings = settingsFrom(env, opts.settings);
  const runId = env.GPUPLANE_RUN_ID || null;
  const muted = isMuted(env, opts.allRanks);
  const mode = (opts.mode ?? (env.GPUPLANE_MODE?.trim().toLowerCase() || 'online')) as 'online' | 'offline';
  if (mode !== 'online' && mode !== 'offline') throw new Error(`gpuplane: mode ${JSON.stringify(mode)} must be online or offline (GPUPLANE_MODE)`);
  const found = findApi(env, opts.apiUrl, opts.token, runId !== null);
  const base = apiBase(found.apiUrl);
  const token = found.token;
  const warn = opts.warn ?? ((msg: string) => process.emitWarning(msg, { type: 'GpuplaneWarning' }));
  const systemTags = { sdk: `gpuplane-ts/${VERSION}`, hostname: os.hostname(), pid: String(process.pid), node: process.versions.node };
  const runLine: Record<string, unknown> = {
    ...(project && !runId ? { project } : {}),
    ...(experiment && !runId ? { experiment } : {}),
    ...(name ? { name } : {}),
    params: params ?? {},
    tags: opts.tags ?? {},
    system_tags: systemTags,
  };
  const common = { base, token, settings, warn, tokenFrom: found.tokenFrom, mode, runLine, offlineDir: offlineDir(env), resumeFrom: env.GPUPLANE_RESUME_FROM || null, uploadApiUrl: found.apiUrlFrom === 'default' ? null : found.apiUrl.trim().replace(/\/+$/, '').replace(/\/api\/v1$/, '') };
  const merged: Record<string, unknown> = {};
  if (runId) {
    try {
      const p: unknown = JSON.parse(env.GPUPLANE_PARAMS || '{}');
      if (p && typeof p === 'object' && !Array.isArray(p)) Object.assign(merged, p);
    } catch {
      // a malformed GPUPLANE_PARAMS is the job's business; the run still works
    }
  }
  Object.assign(merged, params ?? {});
  let run: Run;
  if (runId) {
    const patch: Record<string, unknown> = {
      ...(params && Object.keys(params).length > 0 ? { params } : {}),
      ...(opts.tags ? { tags: opts.tags } : {}),
      ...(name !== undefined ? { name } : {}),
    };
    run = new Run({ ...common, attachedId: runId, create: null, patch: Object.keys(patch).length > 0 ? patch : null, params: merged, muted });
  } else {
    if (!project) throw new Error('gpuplane.init: project is required outside a GPUPlane job');
    const create = {
      project,
      source: 'sdk',
      system_tags: systemTags,
      ...(experiment !== undefined ? { experiment } : {}),
      ...(name !== undefined ? { name } : {}),
      ...(params && Object.keys(params).length > 0 ? { params } : {}),
      ...(opts.tags ? { tags: opts.tags } : {}),
    };
    run = new Run({ ...common, project, attachedId: null, create, patch: null, params: merged });
  }
  if (!muted) await run.start();
  if ((opts.autoFinish ?? true) && !muted) {
    const hook = () => {
      exitHooks.delete(run);
      void run.finish();
    };
    exitHooks.set(run, hook);
    process.once('beforeExit', hook);
  }
  current = run;
  return run;
}

function mustCurrent(): Run {
  if (!current) throw new Error('call gpuplane.init() first');
  return current;
}

/** Buffers {key: value} for the current run; `step` defaults to one more than the last. */
export function log(data: Record<string, number | bigint | boolean>, step?: number): void {
  mustCurrent().log(data, step);
}

/** Records an event on the current run. */
export function event(kind: string, message: string, data?: Record<string, unknown>, level?: EventLevel): void {
  mustCurrent().event(kind, message, data, level);
}

/** Flushes and ends the current run (under a job: only flushes). A no-op without one. */
export async function finish(status: FinishStatus = 'finished', timeoutS?: number): Promise<void> {
  const run = current;
  if (!run) return;
  current = null;
  const hook = exitHooks.get(run);
  if (hook) {
    process.off('beforeExit', hook);
    exitHooks.delete(run);
  }
  await run.finish(status, timeoutS);
}
