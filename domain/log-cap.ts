/**
 * The cap on what the API keeps of an attempt's log (issue 39): one rank's stdout and stderr
 * together keep at most the cap's bytes; the chunk that would pass it is cut there and ends with
 * one line that says so and where the whole file is. The file on the node is never touched.
 */

/**
 * Default cap in MiB (GPUPLANE_LOG_CAP_MIB). 256 MiB is a 200-byte line a second for two weeks,
 * far above what a training script prints, and a bound on what one job can put in the database
 * (its chunks are rows of the plane's PostgreSQL, and every reader of the log pages through them).
 */
export const DEFAULT_LOG_CAP_MIB = 256;

const MIB = 1024 * 1024;

/** The cap in bytes of a setting in MiB; null (no cap) for 0. */
export function logCapBytesOf(mib: number): number | null {
  return mib > 0 ? Math.max(1, Math.floor(mib * MIB)) : null;
}

/** A cap as the truncation line says it: `256 MiB`, `0.5 MiB`, or bytes when under 1 KiB. */
export function formatCap(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  return `${Number((bytes / MIB).toFixed(3))} MiB`;
}

/**
 * The line that ends a truncated stream: which cap, and where the whole file is kept (the node and
 * path the shipper named; a forged or old agent that named none gets "its node").
 */
export function truncationLine(capBytes: number, nodeId: string | null, location: string | null): string {
  const where = nodeId ? `on node ${nodeId}${location ? ` at ${location}` : ''}` : 'on its node';
  return `gpuplane: log truncated at ${formatCap(capBytes)}; the whole file is kept ${where}\n`;
}

/**
 * How much of `fresh` bytes fit under the cap when `held` bytes of the attempt's rank (both
 * streams, the truncation lines included) are stored: all of them (null), or the first `room`.
 */
export function roomUnderCap(capBytes: number | null, held: number, fresh: number): number | null {
  if (capBytes === null || fresh === 0 || held + fresh <= capBytes) return null;
  return Math.max(0, capBytes - held);
}
