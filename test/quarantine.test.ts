import { describe, expect, it } from 'vitest';
import { faultsSince, isQuarantine, quarantineReason, shortDrainReason, type NodeFault } from '../domain/quarantine.ts';

const rule = { after: 3, windowMs: 3600_000 };
const fault = (n: number, cause: NodeFault['cause'] = 'lost'): NodeFault => ({ jobId: `job-${n}`, attempt: 1, cause, at: new Date(n * 1000) });

describe('bad-node quarantine (the pure rule)', () => {
  it('quarantines at K faults, naming them newest first, and not before', () => {
    expect(quarantineReason([fault(3), fault(2)], rule)).toBeNull();
    expect(quarantineReason([fault(3, 'hardware'), fault(2), fault(1)], rule)).toBe(
      'quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h (job-3#1 GPU/driver error, job-2#1 LOST, job-1#1 LOST); gpuctl node resume once it is fixed',
    );
    expect(quarantineReason([fault(4), fault(3), fault(2), fault(1)], { after: 3, windowMs: 600_000 })).toMatch(/^quarantined: 4 attempts .* within 10 min \(job-4#1 LOST, job-3#1 LOST, job-2#1 LOST, …\)/);
  });
  it('tells a quarantine from an admin\'s drain, and shortens it to its count and window', () => {
    const why = quarantineReason([fault(3), fault(2), fault(1)], rule)!;
    expect(isQuarantine(why)).toBe(true);
    expect(isQuarantine('disk swap')).toBe(false);
    expect(isQuarantine(null)).toBe(false);
    expect(shortDrainReason(why)).toBe('quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h');
    expect(shortDrainReason('disk swap (bay 3)')).toBe('disk swap (bay 3)');
  });
  it('is off with K = 0', () => {
    expect(quarantineReason([fault(3), fault(2), fault(1)], { after: 0, windowMs: 1000 })).toBeNull();
  });
  it("counts from the window's start, or from the node's last resume when that is later", () => {
    const now = new Date(10_000_000);
    expect(faultsSince(now, rule, null)).toEqual(new Date(10_000_000 - 3600_000));
    expect(faultsSince(now, rule, new Date(9_000_000))).toEqual(new Date(9_000_000));
    expect(faultsSince(now, rule, new Date(1_000))).toEqual(new Date(10_000_000 - 3600_000));
  });
});
