/**
 * A command as people read and paste it: the CLI (`gpuctl job`, `gpuctl jobs`) and the console
 * show a job's argv this one way, so the two never disagree on what was run.
 */

/** shellJoin returns argv as one line a POSIX shell splits back into the same argv: words with spaces, quotes or nothing in them are single-quoted. */
export function shellJoin(argv: readonly string[]): string {
  return argv.map((a) => (a !== '' && /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}
