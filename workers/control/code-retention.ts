import type { Db } from '../../db/client.ts';
import { codeKeysWanted } from '../../db/queries/code-retention.ts';
import type { ObjectStore } from '../../runtime/object-store-types.ts';

/** How long a code snapshot no job uses is kept (GPUPLANE_CODE_KEEP_S): 30 days. */
export const DEFAULT_CODE_KEEP_S = 30 * 24 * 3600;

/** How often the control worker looks: every hour, or twice a keep period shorter than two hours. */
export function codeRetentionEveryMs(keepMs: number): number {
  return Math.min(3600_000, Math.max(1000, keepMs / 2));
}

/**
 * Deletes the code snapshots (`code/…` in the plane's store) that no job has used for `keepMs`:
 * stored before then, run by no job that has not ended, by none that ended since, and given by no
 * sweep still running. A retry, fork or evaluation that would inherit one is then refused with a
 * 409 that asks for the code again (api/code-store.ts refuseDeletedCode). Returns the keys deleted.
 */
export async function collectCode(db: Db, store: ObjectStore, keepMs: number, now = new Date()): Promise<string[]> {
  const since = new Date(now.getTime() - keepMs);
  const old = (await store.list('code/')).filter((o) => o.modified < since);
  if (old.length === 0) return [];
  const wanted = await codeKeysWanted(db, since);
  const doomed = old.map((o) => o.key).filter((k) => !wanted.has(k));
  if (doomed.length) await store.delete({ keys: doomed });
  return doomed;
}
