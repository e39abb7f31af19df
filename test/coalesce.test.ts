import { describe, expect, it } from 'vitest';
import { coalesce } from '../temporal/scheduler-ops.ts';

describe('coalesce', () => {
  it('folds calls made during a send into one more send, started after them', async () => {
    const starts: number[] = [];
    let release: () => void = () => undefined;
    const send = coalesce(async () => {
      starts.push(Date.now());
      await new Promise<void>((r) => (release = r));
    });
    const first = send();
    const during = [send(), send(), send()];
    expect(starts).toHaveLength(1);
    release();
    await first;
    await new Promise((r) => setTimeout(r, 0));
    expect(starts).toHaveLength(2);
    release();
    await Promise.all(during);
    expect(starts).toHaveLength(2);
  });
});
