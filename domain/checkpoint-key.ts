/**
 * The key of a checkpoint's copy in the plane's object store (docs/storage.md): content-addressed
 * within its run, so the node that uploads it and the node that waits for it name the same object.
 */
export const checkpointKey = (runId: string, fingerprint: string): string => `checkpoints/${runId}/${fingerprint.replace(/^sha256:/, '')}.tar`;
