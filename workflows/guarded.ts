import { log } from '@temporalio/workflow';
import { describeArg } from './message-guards.ts';

/**
 * A signal handler that runs only on an argument `check` accepts; any other is logged with the
 * workflow logger and ignored, so a malformed signal never fails a workflow task. Ignoring
 * issues no command, so runs recorded before the checks replay unchanged.
 */
export function guarded<T, R>(signal: string, check: (v: unknown) => v is T, handler: (v: T) => R): (v: unknown) => R | undefined {
  return (v) => {
    if (check(v)) return handler(v);
    log.warn(`ignored a malformed ${signal} signal: ${describeArg(v)}`, { signal });
    return undefined;
  };
}
