/** Input of the settle workflow (settle-workflow.ts), which the control worker's reconciler starts. */
import type { JobState } from './types.ts';

export interface SettleJobInput {
  jobId: string;
  attempt: number;
  /** The node the attempt was placed on, if any: its process is stopped there first. */
  nodeId: string | null;
  /** A gang's other members' nodes (rank 1 on): the process is stopped on every one. */
  memberNodeIds?: string[];
  state: Extract<JobState, 'SUCCEEDED' | 'FAILED' | 'CANCELLED'>;
  reason: string;
  /** A node that does not take the stop within this long has fenced the attempt itself. */
  lostAfterMs: number;
}
