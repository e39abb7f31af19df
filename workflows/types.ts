/** Types shared by workflows, activities, the API and the CLI. No runtime imports here. */

export const JOB_TYPES = ['TRAIN', 'EVALUATE', 'CUSTOM'] as const;
export type JobType = (typeof JOB_TYPES)[number];

export const JOB_STATES = [
  'CREATED',
  'QUEUED',
  'DISPATCHING',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
  'LOST',
] as const;
export type JobState = (typeof JOB_STATES)[number];

export const TERMINAL_STATES: readonly JobState[] = ['SUCCEEDED', 'FAILED', 'CANCELLED'];
export function isTerminal(state: JobState): boolean {
  return TERMINAL_STATES.includes(state);
}

export type OnLostPolicy = 'requeue' | 'fail';
export type NodeStatus = 'ONLINE' | 'OFFLINE';

export interface GpuCard {
  index: number;
  uuid: string;
  name: string;
  memoryMb: number;
}

export interface NodeInventory {
  nodeId: string;
  labels: Record<string, string>;
  hostname: string;
  gpus: GpuCard[];
}

export interface JobWorkflowInput {
  jobId: string;
  attempt: number;
  heartbeatTimeoutMs: number;
  /** How long a dispatched attempt may wait for its node to pick it up before it counts as LOST. */
  pickupTimeoutMs: number;
  /** A cancel that arrived while the previous attempt was being re-queued. */
  cancelRequested?: boolean;
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
  command: string[];
  workingDir: string;
  env: Record<string, string>;
  /** Given to the process as JSON in GPUPLANE_PARAMS. */
  params: Record<string, unknown>;
  gpuIndices: number[];
}

export interface AttemptStarted {
  attempt: number;
  pid: number;
  logPath: string;
}

/** How a process ended, as the agent saw it. */
export interface ProcessExit {
  exitCode: number | null;
  signal: string | null;
  /** Set when the process never started (bad command, missing working dir). */
  spawnError: string | null;
  logTail: string;
  logPath: string;
}

export interface AttemptOutcome {
  state: Extract<JobState, 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | 'LOST'>;
  exitCode: number | null;
  signal: string | null;
  reason: string | null;
  /** The node stopped answering during this attempt (set with LOST, or a cancel it could not acknowledge). */
  nodeLost?: boolean;
  /** For a process that ran: its log tail and start error, from which the reason is classified. */
  exit?: { logTail: string; spawnError: string | null };
}

export interface SchedulePassResult {
  granted: number;
  queued: number;
  resignalled: number;
  durationMs: number;
}
