import { describe, expect, it } from 'vitest';
import { decideLost } from '../domain/lost-policy.ts';

describe('decideLost', () => {
  it('re-queues a LOST attempt while the job has re-queues left, keeping the reason', () => {
    expect(decideLost({ onLost: 'requeue', lostCount: 0, maxLostRequeues: 3 }, 'node n1 went silent')).toEqual({ to: 'LOST', requeue: true, reason: 'node n1 went silent', counted: true });
    expect(decideLost({ onLost: 'requeue', lostCount: 2, maxLostRequeues: 3 }, null)).toEqual({ to: 'LOST', requeue: true, reason: null, counted: true });
  });
  it('fails the job once its re-queues are used up, saying so', () => {
    expect(decideLost({ onLost: 'requeue', lostCount: 3, maxLostRequeues: 3 }, 'node n1 went silent')).toEqual({
      to: 'FAILED',
      requeue: false,
      reason: 'lost: node n1 went silent; re-queues exhausted (3)',
    });
    expect(decideLost({ onLost: 'requeue', lostCount: 0, maxLostRequeues: 0 }, null)).toEqual({
      to: 'FAILED',
      requeue: false,
      reason: 'lost: node stopped answering; re-queues exhausted (0)',
    });
  });
  it('fails at once under on_lost=fail, whatever re-queues are left', () => {
    expect(decideLost({ onLost: 'fail', lostCount: 0, maxLostRequeues: 3 }, 'node n1 went silent')).toEqual({ to: 'FAILED', requeue: false, reason: 'lost: node n1 went silent' });
    expect(decideLost({ onLost: 'fail', lostCount: 0, maxLostRequeues: 3 }, null)).toEqual({ to: 'FAILED', requeue: false, reason: 'lost: node stopped answering' });
  });
  it('re-queues a loss whose agent was stopped on purpose without taking a re-queue, even past the limit', () => {
    const why = 'the agent shut down while the attempt ran';
    expect(decideLost({ onLost: 'requeue', lostCount: 0, maxLostRequeues: 3 }, why, true)).toEqual({ to: 'LOST', requeue: true, reason: why, counted: false });
    expect(decideLost({ onLost: 'requeue', lostCount: 3, maxLostRequeues: 3 }, why, true)).toEqual({ to: 'LOST', requeue: true, reason: why, counted: false });
    expect(decideLost({ onLost: 'fail', lostCount: 0, maxLostRequeues: 3 }, why, true)).toMatchObject({ to: 'FAILED', requeue: false });
  });
});
