import type { Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/client.ts';
import { getJob } from '../db/queries/jobs.ts';
import { startJobWorkflow, type JobTimeouts, type StartableJob } from '../temporal/client-ops.ts';

type Startable = StartableJob;

/** Past this many starts waiting, a submit waits for its own start (backpressure on a slow Temporal). */
const BACKLOG = 256;
const START_DEADLINE_MS = 10_000;
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 15_000;

/**
 * Starts the workflows of jobs the API has recorded, after the submit has answered: a job is
 * accepted once its row is committed (as `sbatch` returns once slurmctld has the job), and the
 * Temporal start, the slowest part of a submit, happens behind it. Starts go out one at a time,
 * in the order the jobs were recorded, so one client's jobs queue in the order it sent them.
 *
 * A start Temporal refuses or does not answer is tried again, with back-off, for as long as the
 * job is still CREATED; if this process dies first, the control worker's reconciler starts
 * every job left CREATED (temporal/scheduler-ops.ts). Starting is idempotent either way.
 */
export class JobStarter {
  private readonly waiting: { job: Startable; done: () => void }[] = [];
  private running = false;
  private closed = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly deps: { db: Db; client: Client; timeouts: JobTimeouts; log: FastifyBaseLogger },
  ) {}

  /** Queues the start; the promise settles once it is made (or given over to the retries). */
  start(job: Startable): Promise<void> {
    return new Promise((done) => {
      this.waiting.push({ job, done });
      if (this.running) return;
      this.running = true;
      // After the submit's answer has gone out: the start is not part of the request's time.
      setImmediate(() => void this.drain());
    });
  }

  /** True when a submit should wait for its own start instead of answering at once. */
  get backlogged(): boolean {
    return this.waiting.length > BACKLOG;
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const w of this.waiting.splice(0)) w.done();
  }

  private async drain(): Promise<void> {
    try {
      while (!this.closed && this.waiting.length > 0) {
        const { job, done } = this.waiting.shift()!;
        try {
          await this.startNow(job);
        } catch (err) {
          this.deps.log.warn({ err, jobId: job.id }, 'job recorded but Temporal did not take its workflow yet; trying again');
          this.retryLater(job, RETRY_MIN_MS);
        }
        done();
      }
    } finally {
      this.running = false;
    }
  }

  /** One start, bounded: a Temporal that does not answer holds up the starts behind it for 10 s at most. */
  private startNow(job: Startable): Promise<void> {
    const { client, timeouts } = this.deps;
    return client.withDeadline(Date.now() + START_DEADLINE_MS, () => startJobWorkflow(client, job, timeouts));
  }

  private retryLater(job: Startable, delayMs: number): void {
    if (this.closed) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      void this.retry(job, delayMs);
    }, delayMs);
    t.unref();
    this.timers.add(t);
  }

  private async retry(job: Startable, delayMs: number): Promise<void> {
    if (this.closed) return;
    try {
      // Only a job nobody has started since: cancelled, or started by the reconciler, it is left alone.
      const now = await getJob(this.deps.db, job.id);
      if (!now || now.state !== 'CREATED' || now.attempt !== job.attempt) return;
      await this.startNow(job);
      this.deps.log.info({ jobId: job.id }, 'job workflow started after Temporal answered again');
    } catch {
      this.retryLater(job, Math.min(RETRY_MAX_MS, delayMs * 2));
    }
  }
}
