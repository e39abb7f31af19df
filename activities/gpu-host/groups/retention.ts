import type { CheckpointDeletion, DeletionResult, GpuHostActivities } from '../../../workflows/gpu-host-activities.ts';
import { jobUserFor, type JobUser } from '../job-users.ts';
import { deleteAs } from '../scanner-client.ts';
import type { GpuHostContext } from './context.ts';

/** Retention's hand on the node: deleting the files of the checkpoints it let go (the choice is the control plane's, db/queries/retention.ts). */
export function retentionActivities({ deps, roots }: GpuHostContext): Pick<GpuHostActivities, 'deleteCheckpoints'> {
  return {
    /**
     * Deletes the files of checkpoints retention let go, as the job's user (the project's: `project`
     * is the writer job's), only registered entries of `root` (the job's watched folder), each
     * while it is still the inode registered (`inodes`, beside `uris`), and only where that folder
     * resolves inside the allowed roots (../retention.ts).
     */
    async deleteCheckpoints(a: CheckpointDeletion): Promise<DeletionResult> {
      const refuseAll = (reason: string) => ({ deleted: [], refused: a.uris.map((uri) => ({ uri, reason })) });
      const outside = roots && typeof a.root === 'string' ? roots.problem('checkpoint folder', a.root) : null;
      if (outside) return refuseAll(outside);
      let user: JobUser | null = null;
      if (deps.jobUsers) {
        if (a.project === undefined) return refuseAll("the request names no project: files are deleted only as the job's own user");
        try {
          user = jobUserFor(deps.jobUsers, { project: a.project, runAs: a.runAs });
        } catch (err) {
          return refuseAll((err as Error).message);
        }
      }
      const entries = a.uris.map((uri, i) => ({ uri, inode: a.inodes?.[i] ?? null }));
      const r = await deleteAs(user ? { uid: user.uid, gid: user.gid } : null, user?.uid ?? process.getuid?.() ?? 0, a.root, entries);
      // Their copies in the plane's store go with them: only of the checkpoints whose files went.
      const gone = new Set(r.deleted);
      const keys = a.uris.flatMap((uri, i) => (gone.has(uri) && a.keys?.[i] ? [a.keys[i]!] : []));
      if (keys.length && deps.store) await deps.store.delete({ keys });
      return r;
    },
  };
}
