import type { Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/client.ts';
import { ashaSweepOfRun } from '../db/queries/sweeps.ts';
import { ashaRungSteps, ashaSettings } from '../domain/asha.ts';
import type { KeySeries } from '../domain/metrics.ts';
import { sweepWorkflowId } from '../workflows/names.ts';
import { trialProgressSignal } from '../workflows/sweep-messages.ts';

/** Runs remembered (a trial's or not): a run logs many batches, and each would otherwise ask the database. */
const MAX_RUNS = 10_000;

interface Known {
  sweepId: string;
  metric: string;
  rungs: number[];
  /** The highest step of the metric this process has seen for the run. */
  seen: number;
}

/**
 * Wakes an asha sweep when one of its trials logs its metric at or past a rung's step, so that
 * the trial is weighed (and stopped, if it fell behind) at once rather than at the sweep's next
 * poll (GPUPLANE_SWEEP_POLL_MS, which stays the backstop). After the batch is stored, and never
 * in its way: a lookup or signal that fails is logged and forgotten.
 */
export class SweepWaker {
  private readonly runs = new Map<string, Known | null>();

  constructor(
    private readonly db: Db,
    private readonly client: Client,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** Called with a stored batch; returns at once. */
  stored(runId: string, series: readonly KeySeries[]): void {
    void this.check(runId, series).catch((err: unknown) => this.log.debug({ err, runId }, 'sweep wake-up not sent'));
  }

  private async check(runId: string, series: readonly KeySeries[]): Promise<void> {
    let k = this.runs.get(runId);
    if (k === undefined) {
      const s = await ashaSweepOfRun(this.db, runId);
      k = s && s.spec.metric ? { sweepId: s.sweepId, metric: s.spec.metric.name, rungs: ashaRungSteps(ashaSettings(s.spec)), seen: -Infinity } : null;
      if (this.runs.size >= MAX_RUNS) this.runs.delete(this.runs.keys().next().value!);
      this.runs.set(runId, k);
    }
    if (!k) return;
    const m = series.find((x) => x.key === k.metric);
    if (!m || m.steps.length === 0) return;
    const top = Math.max(...m.steps);
    const crossed = k.rungs.some((r) => k.seen < r && r <= top);
    k.seen = Math.max(k.seen, top);
    if (crossed) await this.client.workflow.getHandle(sweepWorkflowId(k.sweepId)).signal(trialProgressSignal, { runId });
  }
}
