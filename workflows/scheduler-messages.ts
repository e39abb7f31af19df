/** Signals and input of the singleton scheduler workflow (`scheduler`). */
import { defineSignal } from '@temporalio/workflow';

/** Something changed that may let a queued job run: a job queued, cards freed, a node joined. */
export const wakeSchedulerSignal = defineSignal('wakeScheduler');

/** The scheduler's fallback interval between passes when nothing wakes it. */
export const DEFAULT_IDLE_PASS_MS = 15_000;

export interface SchedulerInput {
  /** A wake-up that arrived just before the previous run continued as new. */
  pending: boolean;
  /** Fallback interval between passes when nothing signals. */
  idlePassMs: number;
}
