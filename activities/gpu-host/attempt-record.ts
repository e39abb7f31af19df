/**
 * An attempt as the agent holds it: live in memory (Live) and on disk (AttemptRecord), which a
 * restarted agent reads back (survivors.ts).
 */
import type { AttemptSpec } from '../../workflows/types.ts';
import type { WaitStatus } from './proc.ts';

/** One attempt's process as the agent runs it (through job-shim.sh, the leader of its group). */
export interface Live {
  jobId: string;
  attempt: number;
  /** The shim's pid, which is also its process group id and its session id. */
  pid: number;
  /** The shim's start time (proc.ts processStartTime): while the pid has it, the attempt runs. */
  startTime?: string;
  /** The job user it runs as (job-users.ts); null or absent: the agent's own user. */
  uid?: number | null;
  /** How the command ended, as its shim reported it (null: the shim died without a word). */
  exited: Promise<WaitStatus | null>;
  fenced: boolean;
  /** Silence after which its workflow counts it LOST (the agent fences it before that). */
  lostAfterMs: number;
  fenceGraceMs: number;
  fenceAfterMs: number;
  /** Bumped by each activity that takes over watching it: only the newest one may kill it. */
  watcher: number;
  /** Its own cgroup, where the agent may make one (activities/gpu-host/cgroup.ts). */
  cgroup: string | null;
  /** While nobody watches it (adopted, or its activity vanished): fences it unless claimed in time. */
  claimTimer?: NodeJS.Timeout;
}

/** What the agent keeps on disk about each attempt it runs, so that a restarted agent can adopt it. */
export interface AttemptRecord {
  spec: AttemptSpec;
  pid: number;
  startTime: string;
  logPath: string;
  cgroup?: string | null;
  /** The job user it runs as; absent: the agent's own user. */
  uid?: number | null;
  /** What its checkpoint folder held before it started (CheckpointWatching.contentsBefore): a restarted agent's watcher leaves that alone too. */
  checkpointsBefore?: Record<string, string>;
}

/** A gang member's rank in its attempt, from the spec its record keeps: 0 for a single-node job, and for a record written before gangs. */
export function rankOfRecord(rec: Pick<AttemptRecord, 'spec'>): number {
  return rec.spec.gang?.rank ?? 0;
}
