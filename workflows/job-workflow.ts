import { CancellationScope } from '@temporalio/workflow';
import { end, finish } from './job/end.ts';
import { JobAttempt } from './job/job-attempt.ts';
import { runGang } from './job/gang.ts';
import { queue } from './job/queue.ts';
import { runAndWatch } from './job/watch.ts';
import type { JobWorkflowInput, JobWorkflowResult } from './types.ts';

/**
 * One attempt of one job. Each attempt is a run of the workflow `job/<jobId>`; a LOST
 * attempt that policy re-queues continues as new with attempt + 1, and so does a retry_job
 * that an ended FAILED or CANCELLED attempt waited for.
 *
 *   queue ─► run/watch (a gang: every member) ─► finish ─► end ─► await-retry
 *     └─ cancelled or settled before it started ─┘
 *
 * The attempt's state lives in one JobAttempt (workflows/job/job-attempt.ts), with the
 * handlers of every message wired to it before the first step; each step is in workflows/job/.
 *
 * Everything runs in a non-cancellable scope: a cancel request from the Temporal UI or CLI
 * becomes the same cancel as a user's, so the process is killed, the cards are freed and the
 * job ends CANCELLED with a reason, instead of the workflow vanishing mid-attempt.
 */
export async function jobWorkflow(input: JobWorkflowInput): Promise<JobWorkflowResult> {
  const job = new JobAttempt(input);
  job.listen();
  return CancellationScope.nonCancellable(async () => {
    const queued = await queue(job);
    if ('ended' in queued) return end(job, queued.ended);
    // A gang (multi-node job): one watched activity per member, on its node (workflows/job/gang.ts).
    const outcome = queued.spec.gang ? await runGang(job, { ...queued.spec, gang: queued.spec.gang }) : await runAndWatch(job, queued.spec);
    return end(job, await finish(job, outcome));
  });
}
