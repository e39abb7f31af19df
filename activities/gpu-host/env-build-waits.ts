/**
 * The attempts of one agent that wait for a build of a Python environment (python-env.ts): how
 * many wait for each key, and how to stop a build that nobody waits for any more.
 */

/** An attempt cancelled while it waited for a build; `others` still wait for it. */
export class LeftTheBuild extends Error {
  constructor(readonly others: number) {
    super('cancelled during the build');
  }
}

export class BuildWaits {
  private readonly waiting = new Map<string, { n: number; stop: AbortController }>();

  /** A build of `key` starts: the signal that stops it once no attempt waits for it. */
  begin(key: string): AbortSignal {
    const stop = new AbortController();
    this.waiting.set(key, { n: 0, stop });
    return stop.signal;
  }

  /** The build of `key` ended. */
  end(key: string): void {
    this.waiting.delete(key);
  }

  /** One attempt's wait for the build of `key`: its cancel ends the wait (LeftTheBuild), and the build when no other attempt waits for it. */
  async wait(key: string, build: Promise<unknown>, cancel?: AbortSignal): Promise<void> {
    const w = this.waiting.get(key);
    if (!w) {
      await build;
      return;
    }
    w.n++;
    let waiting = true;
    const leave = () => {
      if (!waiting) return;
      waiting = false;
      w.n--;
    };
    let onAbort = () => undefined as void;
    const left = new Promise<never>((_, reject) => {
      onAbort = () => {
        leave();
        if (w.n === 0) w.stop.abort();
        reject(new LeftTheBuild(w.n));
      };
      if (cancel?.aborted) onAbort();
      else cancel?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([build, left]);
    } finally {
      leave();
      cancel?.removeEventListener('abort', onAbort);
    }
  }
}
