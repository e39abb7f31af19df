import { describe, expect, it } from 'vitest';
import { canTransition, JOB_STATES, OPEN_STATES, TERMINAL_STATES, TRANSITIONS } from '../domain/job-states.ts';

describe('the job state machine, written once', () => {
  it('has the seed\'s moves', () => {
    for (const [from, to] of [
      ['CREATED', 'QUEUED'],
      ['QUEUED', 'DISPATCHING'],
      ['DISPATCHING', 'RUNNING'],
      ['RUNNING', 'SUCCEEDED'],
      ['RUNNING', 'FAILED'],
      ['QUEUED', 'CANCELLED'],
      ['RUNNING', 'CANCELLED'],
      ['RUNNING', 'LOST'],
      ['LOST', 'QUEUED'],
      ['FAILED', 'CREATED'],
    ] as const) {
      expect(canTransition(from, to), `${from} → ${to}`).toBe(true);
    }
  });

  it('refuses moves the state machine does not have', () => {
    for (const [from, to] of [
      ['SUCCEEDED', 'RUNNING'],
      ['SUCCEEDED', 'CREATED'],
      ['CANCELLED', 'RUNNING'],
      ['FAILED', 'QUEUED'],
      ['QUEUED', 'RUNNING'],
      ['CREATED', 'RUNNING'],
      ['QUEUED', 'LOST'],
    ] as const) {
      expect(canTransition(from, to), `${from} → ${to}`).toBe(false);
    }
  });

  it('leaves SUCCEEDED for good and reaches every state from CREATED', () => {
    expect(TRANSITIONS.SUCCEEDED).toEqual([]);
    const seen = new Set<string>(['CREATED']);
    const queue = ['CREATED'] as (typeof JOB_STATES)[number][];
    while (queue.length) for (const to of TRANSITIONS[queue.shift()!]) if (!seen.has(to) && seen.add(to)) queue.push(to);
    expect([...seen].sort()).toEqual([...JOB_STATES].sort());
    for (const s of TERMINAL_STATES) expect(OPEN_STATES).not.toContain(s);
  });
});
