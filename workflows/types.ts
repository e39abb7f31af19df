/** Types shared by workflows, activities, the API and the CLI. No runtime imports here but domain/ (pure): the concepts (job states, a node's inventory) live there, re-exported for workflows. */

export { isTerminal, JOB_STATES, OPEN_STATES, TERMINAL_STATES, type JobState } from '../domain/job-states.ts';
export { JOB_TYPES, type JobType } from '../domain/job-types.ts';
import type { JobState } from '../domain/job-states.ts';
import type { JobType } from '../domain/job-types.ts';
import type { AshaState } from '../domain/asha.ts';
import type { SweepSpec } from '../domain/sweep-spec.ts';
import type { JobIdentity } from '../domain/job-identity.ts';

export type { NodeInventory } from '../domain/node.ts';

export interface JobWorkflowInput {
  jobId: string;
  attempt: number;
  /** Heartbeat timeout of the attempt's activities: after it the node is suspect, not yet lost. */
  heartbeatTimeoutMs: number;
  /** Silence after which the attempt is LOST (domain/liveness.ts); also the longest pickup wait. */
  lostAfterMs: number;
  /** How long the workflow of a FAILED or CANCELLED job stays open waiting for retry_job. */
  retryRetentionMs?: number;
  /** An earlier attempt of this job started evaluations (children that outlive it): a cancel cancels the unstarted ones. */
  startedEvaluations?: boolean;
  /** A cancel that arrived while the previous attempt was being re-queued. */
  cancelRequested?: boolean;
  /**
   * An evaluation whose experiment keeps only some checkpoints (retention): once it ends, the
   * checkpoints it held back may go.
   */
  retentionOnEnd?: boolean;
  cancelReason?: string;
  /** The sweep this job is a trial of: each ended attempt wakes the sweep's workflow (`sweep/<id>`). */
  sweepId?: string;
  /**
   * Set by every starter of today's code: the agent reports the attempt's start to the API
   * (the `started-by-api` behaviour) without the patch marker and its search-attribute upsert
   * that `patched()` writes in every run. Runs started before it call `patched()` as they did.
   */
  startedByApi?: true;
}

/** An EVALUATE job a training job's workflow starts as its child. */
export interface EvaluationChild {
  jobId: string;
  type: JobType;
  projectId: string | null;
}

/** The checkpoints retention deletes now, on the node that holds them (db/queries/retention.ts). */
export interface RetentionWork {
  nodeId: string;
  /** The job's watched folder on that node: nothing outside it is touched. */
  root: string;
  /** The writer job's project: the node deletes as its job user. */
  project: string | null;
  /** That project's identity (domain/job-identity.ts); absent: none assigned yet, the node's own map decides. */
  runAs?: JobIdentity;
  /** Each with the `<dev>:<ino>` registered (null: registered before that was recorded), and its copy's key where it is stored. */
  doomed: { id: string; uri: string; inode: string | null; key?: string }[];
}

export interface JobWorkflowResult {
  jobId: string;
  attempt: number;
  state: JobState;
  exitCode: number | null;
  signal: string | null;
  reason: string | null;
}

/** A scheduling decision: these cards on this node belong to this attempt. */
export interface DispatchGrant {
  jobId: string;
  attempt: number;
  nodeId: string;
  gpuIndices: number[];
}

/** What the GPU-host worker needs to start one attempt. */
export interface AttemptSpec {
  jobId: string;
  attempt: number;
  type: JobType;
  runId: string | null;
  /** The job's project: an agent running as root runs each project's jobs as a user of its own (activities/gpu-host/job-users.ts). */
  project?: string | null;
  /**
   * The Unix user the project's jobs run as on every node (domain/job-identity.ts): given by the
   * control plane. Absent (a plane of before identities, or GPUPLANE_JOB_USERS=agent on the
   * control plane): the node's own map of projects to its pool decides.
   */
  runAs?: JobIdentity;
  /** Where the database placed the attempt. */
  nodeId: string;
  command: string[];
  workingDir: string;
  env: Record<string, string>;
  /** Names of the job's secret variables: the agent fetches their values from the API with its node token (never through Temporal). */
  secretEnv?: string[];
  /** Given to the process as JSON in GPUPLANE_PARAMS. */
  params: Record<string, unknown>;
  gpuIndices: number[];
  /**
   * The job's memory limit in MiB on this node (memory_mb): the agent writes it into the
   * attempt's cgroup where it has a memory controller (activities/gpu-host/cgroup.ts). Absent: none.
   */
  memoryMb?: number;
  /** The attempt's lost-after: its agent fences it before that much silence (domain/liveness.ts). */
  lostAfterMs: number;
  /** The job's checkpoint folder, relative to workingDir (`--watch`); absent: nothing is watched. */
  watchDir?: string;
  /** Already RUNNING (a workflow Reset in Temporal): watch the process, never start it again. */
  resumed?: boolean;
  /** A gang (multi-node job): this member's rank and what it is told of the others (domain/gang-env.ts). */
  gang?: AttemptGang;
  /** The checkpoint the attempt resumes from (db/queries/resume-point.ts), given to every member as GPUPLANE_RESUME_FROM; absent: none. */
  resumeFrom?: StoredPoint;
  /** An EVALUATE job's stored checkpoint: its node fetches the copy, named by GPUPLANE_CHECKPOINT_PATH (activities/gpu-host/checkpoint-fetch.ts); absent: the path it was written at. */
  checkpoint?: StoredPoint;
  /** The job's code (domain/code-snapshot.ts): its node fetches the tar by key, checks its sha256 and unpacks it into workingDir as the job's user (activities/gpu-host/code-fetch.ts). */
  code?: { key: string; sha256: string; bytes: number };
  /** The job's Python environment (domain/python-env.ts): its node builds it with uv into a shared read-only cache, and the process runs in it (activities/gpu-host/python-env.ts). */
  pythonEnv?: import('../domain/python-env.ts').PythonEnv;
  /** The job's container image (domain/container-image.ts): the node's podman runs the command in it (activities/gpu-host/container-run.ts). */
  image?: string;
  /** The MLflow name of the run's experiment (`project/experiment`, api/mlflow/wire.ts), given as MLFLOW_EXPERIMENT_NAME; absent for a job without a run. */
  mlflowExperiment?: string;
}

/** A checkpoint an attempt reads: its id and registered path, and where it is stored its copy's key and fingerprint (the node fetches it). */
export interface StoredPoint {
  id: string;
  uri: string;
  key?: string;
  fingerprint?: string;
  /** A resume point's later checkpoint still being stored by its node: waited for up to waitMs (db/queries/resume-point.ts). */
  pending?: { id: string; uri: string; key: string; fingerprint: string; nodeId: string | null; waitMs: number };
}

/** A gang attempt as each member's spec carries it. nodeId and gpuIndices of the spec are members[rank]'s. */
export interface AttemptGang {
  rank: number;
  /** The rendezvous port on rank 0's node. */
  masterPort: number;
  /** Every member in rank order: its node, the address the others reach it at, and its cards. */
  members: GangMemberSpec[];
}

export interface GangMemberSpec {
  nodeId: string;
  address: string;
  gpuIndices: number[];
}

export interface AttemptStarted {
  attempt: number;
  /** A gang member's node (its rank's); absent for a single-node job. */
  nodeId?: string;
  pid: number;
  logPath: string;
}

/** A complete checkpoint, as the agent's watcher found it (activities/gpu-host/checkpoint-watcher.ts). */
export interface CheckpointFound {
  attempt: number;
  /** Absolute path on the node: a file or a directory. */
  uri: string;
  /** `sha256:<hex>` (activities/gpu-host/fingerprint.ts). */
  fingerprint: string;
  sizeBytes: number;
  /** Parsed from the name (domain/checkpoint-name.ts), or null. */
  step: number | null;
  /** `<dev>:<ino>` of the entry hashed: retention deletes it only while it is still that one (absent from older agents). */
  inode?: string;
}

/** How a process ended, as the agent saw it. */
export interface ProcessExit {
  exitCode: number | null;
  signal: string | null;
  /** Set when the process never started (bad command, missing working dir). */
  spawnError: string | null;
  logTail: string;
  logPath: string;
  /** The kernel's OOM killer killed a process of the attempt under its memory limit: that limit, in MiB (absent from older agents). */
  oomLimitMb?: number;
}

export interface AttemptOutcome {
  state: Extract<JobState, 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | 'LOST' | 'PREEMPTED'>;
  exitCode: number | null;
  signal: string | null;
  reason: string | null;
  /** The node stopped answering during this attempt (set with LOST, or a cancel it could not acknowledge). */
  nodeLost?: boolean;
  /** Which nodes stopped answering, for a gang (a member's); absent: the attempt's node. */
  lostNodes?: string[];
  /**
   * With LOST: the first lost node's agent was stopped on purpose (SIGINT/SIGTERM) and stopped
   * the attempt: not counted against that node (domain/quarantine.ts). Absent in histories of before.
   */
  lostCause?: 'agent-stopped';
  /** A gang's member whose end ended the attempt (its exit, failure or lost node). */
  member?: { rank: number; nodeId: string };
  /** For a process that ran: its log tail and start error, from which the reason is classified. */
  exit?: { logTail: string; spawnError: string | null; oomLimitMb?: number };
}

export interface SchedulePassResult {
  granted: number;
  /** Attempts the pass asked to stop for a preemption. */
  preempted?: number;
  queued: number;
  resignalled: number;
  durationMs: number;
}

/** The delivery workflow of one webhook (workflows/webhook-workflow.ts), id `webhook/<webhookId>`. */
export interface WebhookWorkflowInput {
  webhookId: string;
  /** Activities a run makes before it continues as new (500; a test sets a few). */
  stepsPerRun?: number;
}

/** What a delivery workflow's wait answers: the ids of events owed (in order), or that the webhook is gone. */
export interface WebhookWait {
  gone: boolean;
  eventIds: number[];
}

/** A trial the sweep has started and not yet taken the result of. */
export interface ActiveTrial {
  trial: number;
  jobId: string;
  /** The last attempt whose end the sweep has dealt with (0: none). */
  handledAttempt: number;
  /** Retries the sweep has asked for (retry_failed). */
  retries: number;
  /** The sweep asked it to stop (ASHA, or the sweep's cancel): it no longer counts against max_concurrent. */
  stopping?: 'asha' | 'cancel';
  /** ASHA: the next rung whose step it has not reported (0-based). */
  nextRung: number;
}

/** How a sweep's trials ended, so far. */
export interface TrialTally {
  succeeded: number;
  failed: number;
  /** Stopped by ASHA at a rung. */
  stopped: number;
  /** Cancelled by someone (or with the sweep). */
  cancelled: number;
}

/** What a sweep's run hands the next one when it continues as new. */
export interface SweepCarry {
  started: number;
  active: ActiveTrial[];
  tally: TrialTally;
  asha?: AshaState;
  cancelReason?: string;
  cancelSent?: boolean;
  /** Rungs reached and stops decided, not yet written to sweep_trials. */
  unrecorded: RungRecord[];
}

export interface RungRecord {
  jobId: string;
  rung: number;
  stoppedReason: string | null;
}

export interface SweepWorkflowInput {
  sweepId: string;
  /** The sweep's file as created (seed and metric filled in): the workflow needs no read to plan. */
  spec: SweepSpec;
  /** The timeouts its trials' workflows run with. */
  trialTimeouts: { heartbeatTimeoutMs: number; lostAfterMs: number; retryRetentionMs?: number };
  /** How often it reads its trials' states and metrics (GPUPLANE_SWEEP_POLL_MS, default 1 s). */
  pollMs: number;
  /** Between a stopped trial's SIGTERM and its SIGKILL (the plane's preemption grace, GPUPLANE_PREEMPT_GRACE_S). */
  stopGraceMs: number;
  /** Loop turns a run makes before it continues as new (default 1,000; a test sets a few). */
  turnsPerRun?: number;
  carry?: SweepCarry;
}

/** What a sweep's progress read answers: its active trials' jobs now, and ASHA's new reports. */
export interface SweepProgress {
  states: { jobId: string; state: JobState; attempt: number; reason: string | null }[];
  /** In the order to feed them to ASHA; a value that is not finite is sent as its name (JSON has no NaN). */
  reports: { jobId: string; step: number; value: number | 'NaN' | 'Infinity' | '-Infinity' }[];
}

export interface SweepResult {
  sweepId: string;
  state: 'SUCCEEDED' | 'CANCELLED';
  tally: TrialTally;
  started: number;
}
