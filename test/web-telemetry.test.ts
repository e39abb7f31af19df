import { describe, expect, it } from 'vitest';
import { systemPoints } from '../domain/telemetry.ts';
import { stallAfterOf, stallNote } from '../web/src/stall.ts';
import { isSystemKey, splitSystemKeys } from '../web/src/system-metrics.ts';
import type { RunEvent } from '../web/src/types.ts';

/** The keys the agent writes for an attempt on `cards` of the node of `rank` (domain/telemetry.ts). */
const agentKeys = (rank: number, cards: number[]) =>
  systemPoints(
    { jobId: 'j', attempt: 1, rank, gpuIndices: cards, elapsedS: 5, cpuPercent: 90, rssBytes: 2 ** 30, logBytes: 0 },
    cards.map((index) => ({ index, utilization: 50, memoryUsedMb: 1000, memoryTotalMb: 8000, powerW: 200, temperatureC: 60 })),
    0,
  ).map((p) => p.key);

describe("the run page's System panel", () => {
  it("keeps the agent's system/ keys out of the training curves, in their order", () => {
    const { training, system } = splitSystemKeys(['train/loss', ...agentKeys(0, [0]), 'eval/acc', 'systemic', 'lr']);
    expect(training).toEqual(['train/loss', 'eval/acc', 'systemic', 'lr']);
    expect(system.flatMap((c) => c.lines.map((l) => l.key)).every(isSystemKey)).toBe(true);
  });

  it('draws one chart per quantity, a line per card sorted by number, utilization first and CPU and RSS apart', () => {
    const { system } = splitSystemKeys(agentKeys(0, [10, 2, 0]));
    expect(system.map((c) => [c.id, c.title])).toEqual([
      ['system/gpu.*.utilization', 'GPU utilization (%)'],
      ['system/gpu.*.memory_percent', 'GPU memory used (%)'],
      ['system/gpu.*.memory_used_mb', 'GPU memory used (MB)'],
      ['system/cpu.utilization', 'CPU (% of one core, the process group)'],
      ['system/memory.rss_mb', 'Host memory RSS (MB, the process group)'],
      ['system/gpu.*.power_w', 'GPU power (W)'],
      ['system/gpu.*.temperature_c', 'GPU temperature (°C)'],
    ]);
    expect(system[0].lines).toEqual([
      { key: 'system/gpu.0.utilization', label: 'gpu 0' },
      { key: 'system/gpu.2.utilization', label: 'gpu 2' },
      { key: 'system/gpu.10.utilization', label: 'gpu 10' },
    ]);
    expect(system[3].lines).toEqual([{ key: 'system/cpu.utilization', label: 'cpu' }]);
    expect(system[4].lines).toEqual([{ key: 'system/memory.rss_mb', label: 'rss' }]);
  });

  it("puts a gang's members on the same charts, rank by rank", () => {
    const { system } = splitSystemKeys([...agentKeys(1, [0, 1]), ...agentKeys(0, [1])]);
    expect(system[0].lines).toEqual([
      { key: 'system/gpu.1.utilization', label: 'gpu 1' },
      { key: 'system/node1.gpu.0.utilization', label: 'rank 1 gpu 0' },
      { key: 'system/node1.gpu.1.utilization', label: 'rank 1 gpu 1' },
    ]);
    expect(system.find((c) => c.id === 'system/cpu.utilization')!.lines.map((l) => l.label)).toEqual(['rank 0', 'rank 1']);
  });

  it('charts a system key it does not know on its own, after the known ones; a run without any shows no panel', () => {
    const { system } = splitSystemKeys(['system/gpu.0.fan_percent', 'system/disk.read_mb', 'system/gpu.0.utilization']);
    expect(system.map((c) => [c.id, c.title, c.lines.map((l) => l.label)])).toEqual([
      ['system/gpu.*.utilization', 'GPU utilization (%)', ['gpu 0']],
      ['system/disk.read_mb', 'system/disk.read_mb', ['disk']],
      ['system/gpu.*.fan_percent', 'system/gpu.*.fan_percent', ['gpu 0']],
    ]);
    expect(splitSystemKeys(['loss', 'acc']).system).toEqual([]);
  });
});

describe("the job page's stall note", () => {
  const job = { attempt: 2, stalled_at: '2026-12-03T10:00:00.000Z', stall_after_s: null, on_stall: 'tell' };
  const stalledEvent = (attempt: number, s: number): RunEvent => ({ id: attempt, run_id: null, job_id: 'j', attempt, kind: 'job.stalled', level: 'warning', message: 'stalled', data: { stall_after_s: s, on_stall: 'tell' }, at: job.stalled_at });

  it("says what stalled means with the job's own stall-after, else the one its attempt's job.stalled event recorded", () => {
    expect(stallNote({ ...job, stall_after_s: 90 }, [])).toEqual({
      since: job.stalled_at,
      means: 'no metric logged, no log output and its cards under 5 % for 90 s',
      then: expect.stringContaining('It keeps running') as string,
    });
    expect(stallAfterOf(job, [stalledEvent(1, 60), stalledEvent(2, 1800)])).toBe(1800);
    expect(stallNote(job, [stalledEvent(2, 1800)])!.means).toBe('no metric logged, no log output and its cards under 5 % for 30 min');
    expect(stallNote(job, [stalledEvent(1, 60)])!.means).toBe('no metric logged, no log output and its cards under 5 % for its stall-after');
  });

  it('says what the plane does about it, and nothing for a job that is not stalled', () => {
    expect(stallNote({ ...job, on_stall: 'requeue' }, [])!.then).toContain('re-queuing');
    expect(stallNote({ ...job, on_stall: 'kill' }, [])!.then).toContain('FAILED "stalled"');
    expect(stallNote({ ...job, stalled_at: null }, [stalledEvent(2, 60)])).toBeNull();
  });
});
