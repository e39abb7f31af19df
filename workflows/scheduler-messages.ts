/** Signals of the singleton scheduler workflow (`scheduler`). */
import { defineSignal } from '@temporalio/workflow';

/** Something changed that may let a queued job run: a job queued, cards freed, a node joined. */
export const wakeSchedulerSignal = defineSignal('wakeScheduler');
