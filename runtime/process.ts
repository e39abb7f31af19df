/**
 * What every GPUPlane process does the same way around its own work: print its lines, stop
 * cleanly on SIGINT/SIGTERM, and fail with one line. Its database, read from the configuration,
 * is db/open-configured.ts, and its job timeouts temporal/client-ops.ts's timeoutsOf: runtime/
 * loads no database code. The entry points (api/main.ts, workers/control/main.ts,
 * workers/gpu-host/main.ts) and `gpuctl up` share it; it imports none of them.
 */

/** A line for people on stdout (logs go to stderr): what a process prints when it is ready. */
export const printLine = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

/** How a process says it stops: `stopping NAME...` when it begins, `NAME stopped.` when done, with `log`. */
export interface ShutdownLines {
  name: string;
  log: (s: string) => void;
}

/**
 * Runs cleanup once on SIGINT/SIGTERM, then exits. With `say`, the stop is told in the process's
 * own lines (where its banner went, so Ctrl-C does not end in silence); else one line on stderr.
 */
export function onShutdown(fn: () => Promise<void>, say?: ShutdownLines): void {
  let stopping = false;
  const handler = (sig: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (say) say.log(`stopping ${say.name}...`);
    else process.stderr.write(`gpuctl: ${sig}, shutting down...\n`);
    fn().then(
      () => {
        say?.log(`${say.name} stopped.`);
        // Once stdout has taken that line: a pipe's writes are asynchronous on some systems (macOS).
        process.stdout.write('', () => process.exit(0));
      },
      (err: unknown) => {
        process.stderr.write(`gpuctl: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

/** An entry point's body: a failure to start ends the process with one line, `name: message`. */
export function runMain(name: string, fn: () => Promise<void>): void {
  // Through a promise, so that a throw while the arguments are read (a bad flag) ends the same way.
  Promise.resolve()
    .then(fn)
    .catch((err: unknown) => {
      const msg = err instanceof Error ? err.message : String(err);
      process.stderr.write(`${name}: ${msg.split('\n')[0]}\n`);
      process.exit(1);
    });
}
