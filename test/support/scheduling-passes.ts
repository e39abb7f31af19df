import { wakeScheduler } from '../../temporal/scheduler-ops.ts';
import { connectClient } from '../../temporal/setup.ts';
import type { Cluster } from './cluster.ts';
import { until } from './poll.ts';
import { freePort } from './ports.ts';

/**
 * The count of scheduling passes the control worker has finished, as its Prometheus endpoint
 * (GPUPLANE_WORKER_METRICS_ADDR) reports it: recordSchedulingPass counts a pass at its end, once
 * its placements are written and its grants sent.
 */
export class SchedulingPasses {
  private constructor(private readonly addr: string) {}

  /** A free address for the control worker's metrics; start the cluster with `controlEnv`. */
  static async make(): Promise<SchedulingPasses> {
    return new SchedulingPasses(`127.0.0.1:${await freePort()}`);
  }

  get controlEnv(): Record<string, string> {
    return { GPUPLANE_WORKER_METRICS_ADDR: this.addr };
  }

  /** Passes finished so far (0 before the first; a restarted control worker counts from 0 again). */
  async count(): Promise<number> {
    const text = await (await fetch(`http://${this.addr}/metrics`)).text();
    const m = /^gpuplane_scheduling_pass_seconds_count(?:\{[^}]*\})? (\d+)/m.exec(text);
    return m ? Number(m[1]) : 0;
  }

  /**
   * Returns once a whole scheduling pass has run that began after this call: what a "nothing was
   * placed" assertion waits for. The scheduler is woken (a job queued behind a full cluster does
   * not wake it, scheduler/fast-paths.ts placeAlone, and its idle pass is 15 s away), the count
   * read, and it is woken again each time the count moves, until it has moved twice: passes run
   * one after another, so the second one counted after the read began after the first ended,
   * which was after the read, which was after everything the caller did before calling.
   */
  async oneAfterNow(c: Cluster, timeoutMs = 30_000): Promise<void> {
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      const from = await this.count();
      let seen = from;
      await wakeScheduler(t.client);
      await until(
        'two scheduling passes after the wake-up',
        async () => {
          const n = await this.count();
          if (n > seen && n < from + 2) await wakeScheduler(t.client);
          seen = n;
          return n >= from + 2;
        },
        timeoutMs,
      );
    } finally {
      await t.close();
    }
  }
}
