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
 * Under a job (GPUPLANE_RUN_ID set) init() attaches to the job's run. Every request carries
 * `Authorization: Bearer <token>`: the `token` option, else GPUPLANE_TOKEN (set by the agent for a
 * job; run by hand, a member token of the run's project). See docs/sdk.md.
 */

import os from 'node:os';
import { DEFAULT_API_URL, settingsFrom, type SdkSettings } from './encode.ts';
import { apiBase, cleanToken } from './http.ts';
import { Run, type EventLevel, type FinishStatus } from './run.ts';

export { Run, type EventLevel, type FinishStatus } from './run.ts';
export { ApiError, Unreachable } from './http.ts';
export type { SdkSettings } from './encode.ts';

export const VERSION = '0.1.0';

export interface InitOptions {
  /** Default: GPUPLANE_API_URL, else http://127.0.0.1:8787. With or without /api/v1. */
  apiUrl?: string;
  /**
   * The API token, sent as `Authorization: Bearer <token>` and never printed. Default:
   * GPUPLANE_TOKEN (under a job the agent sets it to the run's token; else a member token of the
   * project). Without one the API answers 401 and init() throws.
   */
  token?: string;
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
  const base = apiBase(opts.apiUrl ?? env.GPUPLANE_API_URL ?? DEFAULT_API_URL);
  const token = cleanToken(opts.token ?? env.GPUPLANE_TOKEN);
  const warn = opts.warn ?? ((msg: string) => process.emitWarning(msg, { type: 'GpuplaneWarning' }));
  const runId = env.GPUPLANE_RUN_ID || null;
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
    run = new Run({ base, token, attachedId: runId, create: null, patch: Object.keys(patch).length > 0 ? patch : null, params: merged, settings, warn });
  } else {
    if (!project) throw new Error('gpuplane.init: project is required outside a GPUPlane job');
    const create = {
      project,
      source: 'sdk',
      system_tags: { sdk: `gpuplane-ts/${VERSION}`, hostname: os.hostname(), pid: String(process.pid), node: process.versions.node },
      ...(experiment !== undefined ? { experiment } : {}),
      ...(name !== undefined ? { name } : {}),
      ...(params && Object.keys(params).length > 0 ? { params } : {}),
      ...(opts.tags ? { tags: opts.tags } : {}),
    };
    run = new Run({ base, token, attachedId: null, create, patch: null, params: merged, settings, warn });
  }
  await run.start();
  if (opts.autoFinish ?? true) {
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
