/**
 * A job's memory limit (`memory_mb`, `gpuctl submit --memory`): MiB of RAM on each node it spans
 * (each member of a gang), which the agent writes into the attempt's cgroup (memory.max, or v1's
 * memory.limit_in_bytes) where the node has a memory controller. The bounds are said once here:
 * the API's schemas, the sweep file's check and the CLI's parser all read them.
 */

/** The least a job may ask for: 1 MiB (a limit that small kills it at once; the plane only refuses what is not a limit at all). */
export const MIN_MEMORY_MB = 1;
/** The most a job may ask for: 16 TiB, past any one machine's RAM, so a typo of a unit is refused rather than taken as no limit. */
export const MAX_MEMORY_MB = 16 * 1024 * 1024;

/** The rule in words, for 400s, the sweep file's check and the CLI: one sentence, the same everywhere. */
export const MEMORY_MB_RULE = `memory_mb must be a whole number of MiB from ${MIN_MEMORY_MB} to ${MAX_MEMORY_MB} (16 TiB): the RAM the job may use on each node`;

/** Whether `n` is a memory_mb the plane takes. */
export function isMemoryMb(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= MIN_MEMORY_MB && n <= MAX_MEMORY_MB;
}

const UNIT_MB: Record<string, number> = { '': 1, m: 1, mb: 1, mi: 1, mib: 1, g: 1024, gb: 1024, gi: 1024, gib: 1024, t: 1024 * 1024, tb: 1024 * 1024, ti: 1024 * 1024, tib: 1024 * 1024 };

/**
 * parseMemoryMb reads a size as MiB: `512` (MiB), `512M`, `8G`, `1.5G`, `1T` (binary units,
 * case-insensitive, an optional B or iB). Null when the text is no size, or not a whole number
 * of MiB within the bounds (`0.1M`, `0`, `20T`).
 */
export function parseMemoryMb(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNIT_MB[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) return null;
  const mb = Number(m[1]) * unit;
  return isMemoryMb(mb) ? mb : null;
}

/** `256 MiB`, `8 GiB` (whole GiB only), for reasons and tables. */
export function formatMemoryMb(mb: number): string {
  return mb >= 1024 && mb % 1024 === 0 ? `${mb / 1024} GiB` : `${mb} MiB`;
}

/**
 * The reason of an attempt the kernel's OOM killer ended under the job's own limit (the agent
 * read oom_kill from the attempt's cgroup): one line, with the retry that gives it more.
 */
export function oomUnderLimitReason(limitMb: number, exit: { exitCode: number | null; signal: string | null }, jobId = 'ID'): string {
  const how = exit.signal ? `exit signal ${exit.signal}` : `exit code ${exit.exitCode}`;
  const more = Math.min(MAX_MEMORY_MB, limitMb * 2);
  const arg = more % 1024 === 0 ? `${more / 1024}G` : `${more}M`;
  return `out of memory: the job's limit is ${limitMb} MiB (memory_mb); ${how} — hint: give it more, e.g. gpuctl retry ${jobId} --memory ${arg}`;
}
