import type { Client } from '@temporalio/client';
import type { Podman } from './container-run.ts';
import type { AttemptSpec, NodeInventory } from '../../workflows/types.ts';
import type { JobUsers } from './job-users.ts';
import type { CheckpointWatching } from './checkpoint-watching.ts';
import type { AttemptNote } from './attempt-note.ts';
import type { ObjectStore } from '../../runtime/object-store.ts';
import type { CheckpointCache } from './checkpoint-fetch.ts';
import type { LogShipping } from './log-shipper.ts';
import type { ProcessTable } from './process-table.ts';
import type { EnvCache } from './python-env.ts';
import type { ImagePulls } from './image-pull.ts';

/** What the GPU-host activities work with; the agent (workers/gpu-host/agent.ts) builds it. */
export interface GpuHostDeps {
  nodeId: string;
  processes: ProcessTable;
  client: Client;
  inventory: () => NodeInventory;
  logDir: string;
  apiUrl: string;
  /** Names of the agent's environment that jobs get besides the documented base. */
  passEnv: readonly string[];
  /** Ships each attempt's stdout/stderr to the API (absent: logs stay on the node only). */
  logs?: LogShipping;
  /** Watches the checkpoint folder of attempts submitted with `--watch` (absent: none is watched). */
  checkpoints?: CheckpointWatching;
  /** The node's credential: each job with a run gets its run token, derived from it (runtime/tokens.ts). */
  nodeToken?: string;
  /** The users jobs run as, one per project (an agent running as root); absent: the agent's own user. */
  jobUsers?: JobUsers | null;
  /** Stored resume points fetched into this node's cache before an attempt starts (checkpoint-fetch.ts); absent: the registered path is given. */
  resumeCache?: CheckpointCache;
  /** The plane's object store (docs/storage.md): retention deletes stored copies from it. */
  store?: ObjectStore;
  /** Adds an event to the attempt's history (with the node token; absent without one). */
  note?: (spec: AttemptSpec, n: AttemptNote) => Promise<void>;
  /** The node's Python environments (python-env.ts), bounded by `--env-cache-size`; absent: a cache of the activities' own, with the default bound. */
  pythonEnvs?: EnvCache;
  /** The node's podman (container-run.ts), which runs image jobs; null or absent: none, and an image job that reaches this node fails to start. */
  podman?: Podman | null;
  /** Pulls image jobs' images where the node has none (image-pull.ts), bounded by `--image-cache-size`; absent: pulls of the activities' own (with `podman`), nothing recorded or evicted. */
  images?: ImagePulls | null;
  /** The agent's own warnings (its log). */
  warn?: (msg: string) => void;
  /** Folders that attempts' working dirs and checkpoint folders must resolve inside (absent or empty: anywhere). */
  allowedRoots?: readonly string[];
  /**
   * Called when the node's lease ends without the workflow asking or the agent stopping: its
   * heartbeats stopped reaching the server (a partition), so the node is OFFLINE or soon will
   * be. The agent then brings it back itself as soon as the server answers (workers/gpu-host/reconnect.ts).
   */
  onLeaseLost?: () => void;
}
