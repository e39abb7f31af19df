/**
 * What a checkpoint's name says: whether the watcher should look at it at all, and its step.
 * Pure, so the watcher and its tests agree on one reading.
 */

/**
 * Names that are never a checkpoint: hidden files, `*.tmp`, `*.part` and editor/office locks
 * (`.~name`). A writer that saves to such a name and renames it is seen only under the final name.
 */
export function isTempName(name: string): boolean {
  return name.startsWith('.') || name.endsWith('.tmp') || name.endsWith('.part');
}

// A number after one of the documented words, separated by `_`, `-` or `=` (or nothing):
// step_1200, step-1200, step=1200, epoch=3, epoch_3, ckpt-500, ckpt_500, checkpoint-500.
const STEP_WORD = /(?:^|[^a-z0-9])(step|epoch|ckpt|checkpoint)[-_=]?(\d+)(?![0-9])/gi;

/**
 * The step a checkpoint's name carries, or null. Where the name has both an epoch and a step
 * (Lightning's `epoch=3-step=1200.ckpt`), the step wins: metrics are keyed by step.
 */
export function stepOfName(name: string): number | null {
  let other: number | null = null;
  for (const m of name.matchAll(STEP_WORD)) {
    const n = Number(m[2]);
    if (!Number.isSafeInteger(n)) continue;
    if (m[1].toLowerCase() === 'step') return n;
    other ??= n;
  }
  return other;
}
