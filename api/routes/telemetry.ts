/**
 * POST /nodes/:id/telemetry: an agent's report every GPUPLANE_TELEMETRY_S (activities/gpu-host/telemetry.ts).
 * Its cards feed the GPU gauges of GET /metrics; each of its attempts gets its `system/…` run
 * metrics, and stall detection's rule (domain/stall.ts) is applied to it.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { writeSeries } from '../../db/queries/metrics.ts';
import { markPreemptions } from '../../db/queries/preempt.ts';
import { addStallEvent, attemptsOnNode, markPreemptionFails, ownPointCounts, saveStallMarks, stallRequeues } from '../../db/queries/telemetry.ts';
import { parseBatch } from '../../domain/metrics.ts';
import { DEFAULT_PREEMPT_GRACE_S } from '../../domain/preemption.ts';
import { DEFAULT_MAX_STALL_REQUEUES, DEFAULT_STALL_AFTER_S, freshMarks, stallAfterOf, stalledTimesReason, stalledTooOften, stallMessage, stallStep, type StallMarks } from '../../domain/stall.ts';
import { cardsBusy, systemPoints, type AttemptSample, type CardSample } from '../../domain/telemetry.ts';
import { sendPreemptions } from '../../temporal/scheduler-ops.ts';
import type { ApiDeps } from '../deps.ts';
import { IdParams } from '../schemas/common.ts';
import { TelemetryAnswer, TelemetryBody } from '../schemas/telemetry.ts';

export const telemetryRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, client, metrics, preemptGraceS, stallAfterS, pointLimiter, maxStallRequeues }) => {
  const maxRequeues = maxStallRequeues ?? DEFAULT_MAX_STALL_REQUEUES;
  app.post(
    '/nodes/:id/telemetry',
    { schema: { tags: ['nodes'], summary: "A node's telemetry report (its agent's node token): card samples, and its attempts' use of the host", params: IdParams, body: TelemetryBody, response: { 200: TelemetryAnswer } } },
    async (req) => {
      const nodeId = req.params.id;
      const b = req.body;
      const now = Date.now();
      // A node's clock ahead of ours does not write points in the future.
      const at = Math.min(b.at, now);
      const cards: CardSample[] = b.cards.map((c) => ({ index: c.index, utilization: c.utilization, memoryUsedMb: c.memory_used_mb, memoryTotalMb: c.memory_total_mb, powerW: c.power_w, temperatureC: c.temperature_c }));
      metrics?.cardTelemetry(nodeId, cards, new Set(b.attempts.flatMap((a) => a.gpu_indices)), now, b.interval_s);
      const samples = new Map<string, AttemptSample>(
        b.attempts.map((a) => [`${a.job_id}#${a.attempt}`, { jobId: a.job_id, attempt: a.attempt, rank: a.rank, gpuIndices: a.gpu_indices, elapsedS: a.elapsed_s, cpuPercent: a.cpu_percent, rssBytes: a.rss_bytes, logBytes: a.log_bytes }]),
      );
      const found = await attemptsOnNode(db, nodeId, [...samples.values()]);
      const counts = await ownPointCounts(db, found.flatMap((f) => (f.runId ? [f.runId] : [])));
      const marks: { jobId: string; attempt: number; marks: StallMarks }[] = [];
      const stalled: string[] = [];
      for (const f of found) {
        const s = samples.get(`${f.jobId}#${f.attempt}`)!;
        if (f.runId) {
          const points = systemPoints(s, cards, at);
          if (points.length) {
            await db.transaction((tx) => writeSeries(tx, f.runId!, parseBatch(points, now)));
            metrics?.pointsIngested.inc(points.length);
            // Counted against the run's and its project's limits, never refused: the plane's own measure (api/point-limits.ts).
            await pointLimiter?.charge(f.runId, points.length);
          }
        }
        const after = stallAfterOf({ type: f.type, stallAfterS: f.stallAfterS }, stallAfterS ?? DEFAULT_STALL_AFTER_S, f.projectStallAfterS);
        const step = stallStep(f.marks ?? freshMarks(f.startedAt), { nodeId, now, points: f.runId ? (counts.get(f.runId) ?? 0) : 0, logBytes: s.logBytes, busy: cardsBusy(s.gpuIndices, cards) }, after === null ? null : after * 1000);
        const mark = { jobId: f.jobId, attempt: f.attempt, marks: step.marks };
        if (step.change === null) {
          marks.push(mark);
          continue;
        }
        // The change's marks go in with its event: one found again after a failed write is told once.
        const orders = await db.transaction(async (tx) => {
          await saveStallMarks(tx, [mark]);
          if (step.change === 'cleared') {
            await addStallEvent(tx, { jobId: f.jobId, attempt: f.attempt, runId: f.runId, stalled: false, message: 'no longer stalled: it showed life again', data: {} });
            return [];
          }
          const message = stallMessage(after!);
          await addStallEvent(tx, { jobId: f.jobId, attempt: f.attempt, runId: f.runId, stalled: true, message, data: { stall_after_s: after, on_stall: f.onStall } });
          if (f.onStall === 'tell') return [];
          // A job that stalls again and again is not re-queued for ever: past the cap its stall fails it.
          const requeued = f.onStall === 'requeue' ? await stallRequeues(tx, f.jobId, f.attempt) : 0;
          const fail = f.onStall === 'kill' || stalledTooOften(requeued, maxRequeues);
          // kill: the attempt is stopped as a preemption is (SIGTERM, the grace, SIGKILL), and ends FAILED; requeue: PREEMPTED, and the next attempt is queued.
          if (fail) await markPreemptionFails(tx, f.jobId, f.attempt);
          const reason = f.onStall === 'kill' ? `${message} (--on-stall kill)` : fail ? stalledTimesReason(requeued, maxRequeues, after!) : `${message}; re-queued (--on-stall requeue)`;
          const marked = await markPreemptions(tx, [{ jobId: f.jobId, attempt: f.attempt, reason }], preemptGraceS ?? DEFAULT_PREEMPT_GRACE_S, new Date(now));
          return marked.map((o) => ({ ...o, fail }));
        });
        if (step.change === 'stalled') stalled.push(f.jobId);
        // Temporal not answering loses nothing: the scheduler's passes send an unheard preemption again.
        if (orders.length) await sendPreemptions(client, orders);
      }
      await saveStallMarks(db, marks);
      return { attempts: found.length, stalled };
    },
  );
};
