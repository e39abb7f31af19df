import { PROBE_INTERVAL_MS } from '../../domain/liveness.ts';

/** Retries `fn` every second while `wanted()` holds; ends quietly when it stops holding. */
export async function retryWhile(wanted: () => boolean, fn: () => Promise<unknown>): Promise<void> {
  while (wanted()) {
    try {
      await fn();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, PROBE_INTERVAL_MS));
    }
  }
}
