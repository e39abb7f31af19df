import { describe, expect, it } from 'vitest';
import { freshMarks, stallAfterOf, stalledTimesReason, stalledTooOften, stallStep, type StallMarks } from '../domain/stall.ts';
import { cardsBusy, fakeCardSample, parseTelemetryLine, systemPoints } from '../domain/telemetry.ts';
import { durationArg } from '../cli/args.ts';

const S = 1000;
const obs = (now: number, o: Partial<{ points: number; logBytes: number; busy: boolean; nodeId: string }> = {}) => ({ nodeId: 'n1', now, points: 0, logBytes: 0, busy: false, ...o });

describe('the stall rule (domain/stall.ts)', () => {
  it('flags an attempt silent on all three counts for its stall-after, once, and clears it when it shows life', () => {
    let m: StallMarks = freshMarks(0);
    const changes: (string | null)[] = [];
    for (let t = 10; t <= 60; t += 10) {
      const s = stallStep(m, obs(t * S), 30 * S);
      m = s.marks;
      changes.push(s.change);
    }
    expect(changes).toEqual([null, null, 'stalled', null, null, null]);
    expect(m.stalledAt).toBe(30 * S);
    const back = stallStep(m, obs(70 * S, { points: 1 }), 30 * S);
    expect(back.change).toBe('cleared');
    expect(back.marks.stalledAt).toBeNull();
    expect(back.marks.activeAt).toBe(70 * S);
  });

  it('counts each sign of life: a metric, log growth on a node, a busy card', () => {
    const base = stallStep(freshMarks(0), obs(10 * S, { logBytes: 500, points: 4 }), 30 * S).marks;
    expect(base.activeAt).toBe(10 * S); // its first points count as logged
    expect(stallStep(base, obs(40 * S, { logBytes: 500, points: 4 }), 30 * S).change).toBe('stalled');
    expect(stallStep(base, obs(40 * S, { logBytes: 501, points: 4 }), 30 * S).change).toBeNull();
    expect(stallStep(base, obs(40 * S, { logBytes: 500, points: 5 }), 30 * S).change).toBeNull();
    expect(stallStep(base, obs(40 * S, { logBytes: 500, points: 4, busy: true }), 30 * S).change).toBeNull();
  });

  it("takes a node's first log size as a mark, not as growth; a gang's nodes are kept apart", () => {
    const first = stallStep(freshMarks(0), obs(40 * S, { logBytes: 9000 }), 30 * S);
    expect(first.change).toBe('stalled');
    const other = stallStep(first.marks, obs(41 * S, { nodeId: 'n2', logBytes: 100 }), 30 * S);
    expect(other.change).toBeNull();
    expect(stallStep(other.marks, obs(42 * S, { nodeId: 'n2', logBytes: 200 }), 30 * S).change).toBe('cleared');
  });

  it('never flags without a stall-after; CUSTOM jobs have none by default, 0 turns it off', () => {
    expect(stallStep(freshMarks(0), obs(1e9), null).change).toBeNull();
    expect(stallAfterOf({ type: 'CUSTOM', stallAfterS: null }, 1800)).toBeNull();
    expect(stallAfterOf({ type: 'TRAIN', stallAfterS: null }, 1800)).toBe(1800);
    expect(stallAfterOf({ type: 'TRAIN', stallAfterS: 0 }, 1800)).toBeNull();
    expect(stallAfterOf({ type: 'CUSTOM', stallAfterS: 60 }, 1800)).toBe(60);
    expect(stallAfterOf({ type: 'EVALUATE', stallAfterS: null }, 0)).toBeNull();
    // A project's own comes between the job's and the plane's, for TRAIN and EVALUATE jobs only.
    expect(stallAfterOf({ type: 'TRAIN', stallAfterS: null }, 1800, 600)).toBe(600);
    expect(stallAfterOf({ type: 'TRAIN', stallAfterS: 60 }, 1800, 600)).toBe(60);
    expect(stallAfterOf({ type: 'TRAIN', stallAfterS: null }, 1800, 0)).toBeNull();
    expect(stallAfterOf({ type: 'CUSTOM', stallAfterS: null }, 1800, 600)).toBeNull();
  });
});

describe('the cap on --on-stall requeue (domain/stall.ts)', () => {
  it('re-queues up to the cap, then the next stall fails the job "stalled N times"', () => {
    expect([0, 1, 2, 3, 4].map((n) => stalledTooOften(n, 3))).toEqual([false, false, false, true, true]);
    expect(stalledTooOften(0, 0)).toBe(true);
    expect(stalledTimesReason(3, 3, 1800)).toBe('stalled 4 times: no metric logged, no log output and its cards under 5 % for 30 min (--on-stall requeue re-queues at most 3 times)');
    expect(stalledTimesReason(1, 1, 5)).toMatch(/^stalled 2 times: .* for 5 s \(--on-stall requeue re-queues at most 1 time\)$/);
  });
});

describe('telemetry (domain/telemetry.ts)', () => {
  it("reads nvidia-smi's telemetry lines, [N/A] fields as null", () => {
    expect(parseTelemetryLine('0, 87, 30512, 81559, 312.45, 64')).toEqual({ index: 0, utilization: 87, memoryUsedMb: 30512, memoryTotalMb: 81559, powerW: 312.45, temperatureC: 64 });
    expect(parseTelemetryLine('3, 0, 0, 81559, [N/A], [N/A]')).toEqual({ index: 3, utilization: 0, memoryUsedMb: 0, memoryTotalMb: 81559, powerW: null, temperatureC: null });
    expect(parseTelemetryLine('index, utilization.gpu [%], memory.used [MiB]')).toBeNull();
    expect(parseTelemetryLine('')).toBeNull();
  });

  it('writes only the cards of the attempt, under system/, rank > 0 under node<rank>', () => {
    const cards = [fakeCardSample(0, 90, 81920), fakeCardSample(1, null, 81920)];
    const a = { jobId: 'j', attempt: 1, rank: 0, gpuIndices: [0], elapsedS: 12.7, cpuPercent: 90, rssBytes: 512 * 1048576, logBytes: 0 };
    const pts = systemPoints(a, cards, 1000);
    expect(pts.map((p) => p.key)).toEqual(['system/gpu.0.utilization', 'system/gpu.0.memory_used_mb', 'system/gpu.0.memory_percent', 'system/gpu.0.power_w', 'system/gpu.0.temperature_c', 'system/cpu.utilization', 'system/memory.rss_mb']);
    expect(pts.every((p) => p.step === 12 && p.ts === 1000)).toBe(true);
    expect(pts.find((p) => p.key === 'system/memory.rss_mb')!.value).toBe(512);
    expect(systemPoints({ ...a, rank: 2 }, cards, 1000)[0].key).toBe('system/node2.gpu.0.utilization');
    expect(cardsBusy([0], cards)).toBe(true);
    expect(cardsBusy([1], cards)).toBe(false);
  });

  it('fake cards are busy with their job, idle without one, and deterministic', () => {
    expect(fakeCardSample(0, null, 1000)).toEqual(fakeCardSample(0, null, 1000));
    expect(fakeCardSample(0, null, 1000).utilization).toBe(0);
    expect(fakeCardSample(0, 0, 1000).utilization).toBe(0);
    expect(fakeCardSample(0, 250, 1000).utilization).toBe(100);
    expect(fakeCardSample(0, 40, 1000).memoryUsedMb).toBeGreaterThan(0);
  });
});

describe('durations on the command line', () => {
  it('reads 90, 90s, 30m, 2h, 1d and off; refuses the rest with one line', () => {
    const d = durationArg('--stall-after', 30 * 86_400);
    expect([d('90'), d('90s'), d('30m'), d('2h'), d('1d'), d('off'), d('0')]).toEqual([90, 90, 1800, 7200, 86_400, 0, 0]);
    expect(() => d('5x')).toThrow(/--stall-after must be a duration/);
    expect(() => d('31d')).toThrow(/at most 30 days/);
  });
});
