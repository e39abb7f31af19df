import type { AttemptSpec, ProcessExit } from './types.ts';
import type { JobIdentity } from '../domain/job-identity.ts';

/*
 * What the workflows call on a node's own task queue (`gpu-host.<nodeId>`): the workflows own
 * this interface, and the agent's activities implement it (activities/gpu-host.ts declares
 * `createGpuHostActivities` to return it), so an activity that drifts from what its callers send
 * or read is a type error, and workflows/ never imports from activities/.
 *
 * Members are properties, not methods, on purpose: TypeScript checks a method's parameters both
 * ways, so an activity that wanted a field no workflow sends would still type-check.
 * The names are what Temporal dispatches by: renaming one breaks every open run that calls it.
 */

/** Names one attempt of one job. */
export interface AttemptRef {
  jobId: string;
  attempt: number;
}

/** What became of the checkpoint files a node was asked to delete. */
export interface DeletionResult {
  /** Paths now gone (deleted here, or already absent). */
  deleted: string[];
  /** Paths kept, each with why. */
  refused: { uri: string; reason: string }[];
}

/** The checkpoints of one watched folder to delete, as the writer job's user. */
export interface CheckpointDeletion {
  /** The job's watched folder: only registered entries directly in it are touched. */
  root: string;
  uris: string[];
  /** The writer job's project (its job user deletes); absent from older callers, then refused where job users are on. */
  project?: string | null;
  /** That project's identity (types.ts AttemptSpec.runAs); absent: the node's own map decides. */
  runAs?: JobIdentity;
  /** `<dev>:<ino>` registered for each of `uris` (null: registered before inodes were). */
  inodes?: (string | null)[];
  /** The key of each one's copy in the plane's object store (null: none): deleted with its files. */
  keys?: (string | null)[];
}

export interface GpuHostActivities {
  /** Starts the attempt's process (never a twin of one already running here) and reports its exit; heartbeats all along. */
  runJob: (spec: AttemptSpec) => Promise<ProcessExit>;
  /** Takes over watching an attempt started earlier on this node (the agent restarted, or runJob's heartbeats went unheard). */
  watchJob: (a: AttemptRef) => Promise<ProcessExit>;
  /** Kills an attempt whose workflow is gone (settleJobWorkflow); `stopped`: it was running here and is dead now. */
  stopAttempt: (a: AttemptRef) => Promise<{ stopped: boolean }>;
  /** SIGTERM to the attempt, SIGKILL after `graceMs`; its watching activity reports the exit. */
  preemptAttempt: (a: AttemptRef & { graceMs: number }) => Promise<{ stopped: boolean }>;
  /** Deletes the files of checkpoints retention let go. */
  deleteCheckpoints: (a: CheckpointDeletion) => Promise<DeletionResult>;
  /** Holds the node's lease: signals it ONLINE, then heartbeats until cancelled or the agent stops. */
  nodeLease: (a: { nodeId: string }) => Promise<void>;
}
