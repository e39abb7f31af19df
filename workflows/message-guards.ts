/**
 * Checks of what arrives in a workflow's signals and updates. Anyone who reaches Temporal can
 * send a message with any argument (none, null, a number, a huge string), and a handler that
 * reads a field of it would throw, failing every workflow task of the run for good. So each
 * handler checks its argument here first: a malformed signal is logged and ignored, a
 * malformed update is refused by its validator. Pure and hand-written: no I/O, deterministic.
 */
import type { CancelRequest, NodeDeclaredDead, PreemptRequest, RetryRequest } from './job-messages.ts';
import type { AttemptStarted, CheckpointFound, DispatchGrant, NodeInventory } from './types.ts';

/** The longest id (job, node) a message may carry: the API's own bound. */
export const MAX_ID_CHARS = 128;
/** The longest path (a log file, a checkpoint) or free text (a cancel reason) a message may carry. */
export const MAX_TEXT_CHARS = 4096;
/** At most this many cards on a node, entries in a list, labels on a node. */
export const MAX_ITEMS = 1024;

type Rec = Record<string, unknown>;

const isRecord = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);
const isText = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;
const isId = (v: unknown): v is string => isText(v, MAX_ID_CHARS) && v.length > 0;
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isAttempt = (v: unknown): v is number => isCount(v) && v >= 1;
const isListOf = (v: unknown, each: (x: unknown) => boolean): v is unknown[] => Array.isArray(v) && v.length <= MAX_ITEMS && v.every(each);

/** `dispatch`: the scheduler's grant (only a wake-up; the attempt is what counts). */
export function isDispatchGrant(v: unknown): v is DispatchGrant {
  return isRecord(v) && isId(v.jobId) && isAttempt(v.attempt) && isId(v.nodeId) && isListOf(v.gpuIndices, isCount);
}

/** `attemptStarted` and `reattach`: the agent's report of the attempt's process. */
export function isAttemptStarted(v: unknown): v is AttemptStarted {
  return isRecord(v) && isAttempt(v.attempt) && isCount(v.pid) && isText(v.logPath, MAX_TEXT_CHARS) && (v.nodeId === undefined || isText(v.nodeId, MAX_TEXT_CHARS));
}

/** `checkpointFound`: a complete checkpoint the agent's watcher found. */
export function isCheckpointFound(v: unknown): v is CheckpointFound {
  return (
    isRecord(v) &&
    isAttempt(v.attempt) &&
    isText(v.uri, MAX_TEXT_CHARS) &&
    v.uri.length > 0 &&
    isText(v.fingerprint, MAX_TEXT_CHARS) &&
    isCount(v.sizeBytes) &&
    (v.step === null || isCount(v.step)) &&
    (v.inode === undefined || (isText(v.inode, 64) && /^\d+:\d+$/.test(v.inode)))
  );
}

/** `cancelJob`: an object, with an optional reason of bounded length. */
export function isCancelRequest(v: unknown): v is CancelRequest {
  return isRecord(v) && (v.reason === undefined || isText(v.reason, MAX_TEXT_CHARS)) && (v.bySweep === undefined || typeof v.bySweep === 'boolean');
}

/** `trialEnded`: a sweep's trial's job and the attempt that ended. */
export function isTrialEnded(v: unknown): v is { jobId: string; attempt: number } {
  return isRecord(v) && isId(v.jobId) && isAttempt(v.attempt);
}

/** `preemptJob`: the scheduler's order to stop this attempt for a preemption, with its grace. */
export function isPreemptRequest(v: unknown): v is PreemptRequest {
  return isRecord(v) && isAttempt(v.attempt) && isText(v.reason, MAX_TEXT_CHARS) && isCount(v.graceMs) && (v.fail === undefined || typeof v.fail === 'boolean') && (v.cancel === undefined || typeof v.cancel === 'boolean');
}

/** `nodeDeclaredDead`: the control plane's verdict on one node of the attempt. */
export function isNodeDeclaredDead(v: unknown): v is NodeDeclaredDead {
  return isRecord(v) && isAttempt(v.attempt) && isId(v.nodeId) && isText(v.reason, MAX_TEXT_CHARS);
}

/** `retryJob` (update and signal): the next attempt and the edit already stored. */
export function isRetryRequest(v: unknown): v is RetryRequest {
  return isRecord(v) && isAttempt(v.attempt) && isListOf(v.changes, (c) => isRecord(c) && isText(c.key, MAX_TEXT_CHARS));
}

/** `nodeOnline`: the agent's inventory of its node. */
export function isNodeInventory(v: unknown): v is NodeInventory {
  if (!isRecord(v) || !isId(v.nodeId) || !isText(v.hostname, MAX_TEXT_CHARS) || !isRecord(v.labels)) return false;
  const labels = Object.entries(v.labels);
  if (labels.length > MAX_ITEMS || !labels.every(([k, x]) => k.length <= MAX_TEXT_CHARS && isText(x, MAX_TEXT_CHARS))) return false;
  const isCard = (g: unknown) =>
    isRecord(g) && isCount(g.index) && isText(g.uuid, MAX_TEXT_CHARS) && isText(g.name, MAX_TEXT_CHARS) && typeof g.memoryMb === 'number' && Number.isFinite(g.memoryMb) && g.memoryMb >= 0;
  return isListOf(v.gpus, isCard);
}

/** A short description of a refused argument for the log: its kind and size, never its content. */
export function describeArg(v: unknown): string {
  if (v === undefined) return 'no argument';
  if (v === null) return 'null';
  if (typeof v === 'string') return `a string of ${v.length} characters`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (typeof v === 'object') {
    const keys = Object.keys(v);
    const shown = keys.slice(0, 8).map((k) => (k.length > 40 ? `${k.slice(0, 40)}…` : k));
    return `an object with fields [${shown.join(', ')}${keys.length > 8 ? `, … ${keys.length} in all` : ''}]`;
  }
  return `a ${typeof v}`;
}
