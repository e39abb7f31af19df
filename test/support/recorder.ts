/**
 * The body of a test job that records its own life in `<dir>/<jobId>-<attempt>` (a gang
 * member's in `<dir>/<jobId>-<attempt>.r<rank>`): a start line (time in ms, pid, node, cards) and
 * an end line, written by a trap when it is killed.
 */
export function recorderScript(dir: string, seconds: number): string {
  return [
    `f="${dir}/$GPUPLANE_JOB_ID-$GPUPLANE_ATTEMPT\${GPUPLANE_NODE_RANK:+.r$GPUPLANE_NODE_RANK}"`,
    `echo "start $(date +%s%3N) $$ $GPUPLANE_NODE_ID $CUDA_VISIBLE_DEVICES" >> "$f"`,
    `trap 'echo "end $(date +%s%3N) killed" >> "$f"; exit 143' TERM`,
    `sleep ${seconds} & wait $!`,
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
