import fs from 'node:fs';
import path from 'node:path';

/**
 * The body of a test job that records its own life in `<dir>/<jobId>-<attempt>` (a gang member
 * in `<dir>/<jobId>-<attempt>-r<rank>`): a start line (time in ms, pid, node, cards) and an end
 * line, written by a trap when it is killed.
 * It runs `seconds`; with `release`, an attempt after the first runs instead until that file
 * exists (the test says when it has seen what it waits for while the attempt still runs).
 */
export function recorderScript(dir: string, seconds: number, release?: string): string {
  const sleep = `sleep ${seconds} & wait $!`;
  return [
    `f="${dir}/$GPUPLANE_JOB_ID-$GPUPLANE_ATTEMPT\${NODE_RANK:+-r$NODE_RANK}"`,
    `echo "start $(date +%s%3N) $$ $GPUPLANE_NODE_ID $CUDA_VISIBLE_DEVICES" >> "$f"`,
    `trap 'echo "end $(date +%s%3N) killed" >> "$f"; exit 143' TERM`,
    release ? `if [ "$GPUPLANE_ATTEMPT" = 1 ]; then ${sleep}; else while [ ! -e "${release}" ]; do sleep 0.2 & wait $!; done; fi` : sleep,
    `echo "end $(date +%s%3N) done" >> "$f"`,
  ].join('; ');
}

export interface RecordedSpan {
  start: number;
  end: number;
  pid: number;
  killed: boolean;
}

/** Reads a recorder file; a process that never wrote its end line counts as still alive. */
export function parseRecord(text: string): RecordedSpan {
  const [first, second] = text.trim().split('\n');
  const s = first.split(' ');
  const e = second?.split(' ');
  return { start: Number(s[1]), pid: Number(s[2]), end: e ? Number(e[1]) : Number.POSITIVE_INFINITY, killed: e?.[2] === 'killed' };
}

/**
 * Pairs of processes of one job, of different attempts, alive at the same time, from the
 * recorder files in `dir` (a gang's members of one attempt overlap by design and are not counted).
 */
export function overlappingAttempts(dir: string, jobId: string): number {
  const spans = fs
    .readdirSync(dir)
    .filter((f) => f.startsWith(`${jobId}-`))
    .map((f) => ({ attempt: Number(f.slice(jobId.length + 1).split('-')[0]), ...parseRecord(fs.readFileSync(path.join(dir, f), 'utf8')) }));
  let n = 0;
  for (let i = 0; i < spans.length; i++) {
    for (let j = i + 1; j < spans.length; j++) {
      const [a, b] = [spans[i], spans[j]];
      if (a.attempt !== b.attempt && a.start < b.end && b.start < a.end) n++;
    }
  }
  return n;
}
