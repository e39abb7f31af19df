import { describe, expect, it } from 'vitest';
import { describeArg, isAttemptStarted, isCancelRequest, isCheckpointFound, isDispatchGrant, isNodeInventory, isRetryRequest, MAX_TEXT_CHARS } from '../workflows/message-guards.ts';

/** The checks every signal and update handler runs on its argument first (workflows/message-guards.ts). */
const long = 'x'.repeat(MAX_TEXT_CHARS + 1);
const junk: unknown[] = [undefined, null, 42, 'text', long, [], true];

describe('workflow message guards', () => {
  it('accept what our own senders send (the recorded histories carry these)', () => {
    expect(isDispatchGrant({ jobId: 'job-a', attempt: 1, nodeId: 'r1', gpuIndices: [0, 1] })).toBe(true);
    expect(isAttemptStarted({ attempt: 2, pid: 29107, logPath: '/tmp/a/attempt-2.log' })).toBe(true);
    expect(isCheckpointFound({ attempt: 1, uri: '/w/ckpts/step_20.npz', fingerprint: `sha256:${'a'.repeat(64)}`, sizeBytes: 10, step: 20 })).toBe(true);
    expect(isCheckpointFound({ attempt: 1, uri: '/w/ckpts/last', fingerprint: 'sha256:0', sizeBytes: 0, step: null })).toBe(true);
    expect(isCancelRequest({})).toBe(true);
    expect(isCancelRequest({ reason: 'recording a history' })).toBe(true);
    expect(isRetryRequest({ attempt: 2, changes: [{ key: 'command', from: ['a'], to: ['b'] }] })).toBe(true);
    expect(isNodeInventory({ nodeId: 'l2', labels: { zone: 'a' }, hostname: 'vm', gpus: [{ index: 0, uuid: 'GPU-fake-l2-0', name: 'Fake GPU', memoryMb: 81920 }] })).toBe(true);
  });

  it('refuse none, null, numbers, strings and arrays', () => {
    for (const check of [isDispatchGrant, isAttemptStarted, isCheckpointFound, isCancelRequest, isRetryRequest, isNodeInventory]) {
      for (const v of junk) expect(check(v), `${check.name}(${describeArg(v)})`).toBe(false);
    }
    for (const check of [isDispatchGrant, isAttemptStarted, isCheckpointFound, isRetryRequest]) expect(check({ attempt: 'one' }), check.name).toBe(false);
  });

  it('refuse fields of the wrong type or size', () => {
    expect(isDispatchGrant({ jobId: 'j', attempt: 0, nodeId: 'n', gpuIndices: [] })).toBe(false);
    expect(isDispatchGrant({ jobId: 'j', attempt: 1, nodeId: 'n', gpuIndices: 'all' })).toBe(false);
    expect(isAttemptStarted({ attempt: 1.5, pid: 1, logPath: 'l' })).toBe(false);
    expect(isAttemptStarted({ attempt: 1, pid: 1, logPath: long })).toBe(false);
    expect(isCheckpointFound({ attempt: 1, uri: '', fingerprint: 'f', sizeBytes: 1, step: null })).toBe(false);
    expect(isCheckpointFound({ attempt: 1, uri: 'u', fingerprint: 'f', sizeBytes: -1, step: null })).toBe(false);
    expect(isCheckpointFound({ attempt: 1, uri: 'u', fingerprint: 'f', sizeBytes: 1, step: '3' })).toBe(false);
    expect(isCancelRequest({ reason: 7 })).toBe(false);
    expect(isCancelRequest({ reason: long })).toBe(false);
    expect(isRetryRequest({ attempt: 2, changes: 'x' })).toBe(false);
    expect(isRetryRequest({ attempt: 2, changes: [{ key: 9 }] })).toBe(false);
    expect(isRetryRequest({ attempt: Number.NaN, changes: [] })).toBe(false);
    expect(isNodeInventory({ nodeId: 'n', labels: { a: 1 }, hostname: 'h', gpus: [] })).toBe(false);
    expect(isNodeInventory({ nodeId: 'n', labels: {}, hostname: 'h', gpus: [{ index: 0, uuid: 'u', name: 'n', memoryMb: Infinity }] })).toBe(false);
    expect(isNodeInventory({ nodeId: 'x'.repeat(129), labels: {}, hostname: 'h', gpus: [] })).toBe(false);
  });

  it('describe a refused argument by kind and size, never by content', () => {
    expect(describeArg(undefined)).toBe('no argument');
    expect(describeArg(null)).toBe('null');
    expect(describeArg(42)).toBe('a number');
    expect(describeArg(long)).toBe(`a string of ${long.length} characters`);
    expect(describeArg({ reason: long })).toBe('an object with fields [reason]');
    expect(describeArg(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, i])))).toMatch(/k7, … 10 in all\]$/);
  });
});
