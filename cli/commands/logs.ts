import { once } from 'node:events';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { isRunId, logRefs, openLogs, type LogStreamName } from '../client-logs.ts';
import { clientOf, out } from '../client-of.ts';
import { table } from '../table.ts';

const attemptArg = (v: string) => {
  if (!/^[1-9]\d{0,8}$/.test(v)) throw new InvalidArgumentError('the attempt must be an integer >= 1');
  return Number(v);
};
const rankArg = (v: string) => {
  if (!/^\d{1,4}$/.test(v) || Number(v) > 1023) throw new InvalidArgumentError('the rank must be an integer from 0 to 1023');
  return Number(v);
};

/** Copies the bytes to stdout as they come, minding its backpressure; a closed pipe (`| head`) ends quietly. */
async function pipeToStdout(body: AsyncIterable<Uint8Array>): Promise<void> {
  try {
    for await (const b of body) {
      if (!process.stdout.write(b)) await once(process.stdout, 'drain');
    }
  } catch (err) {
    throw new Error(`the log stream from the API was cut: ${(err as Error).cause ?? (err as Error).message}`);
  }
}

/** `gpuctl logs [-f] [--attempt N] [--rank R] [--stream S] [--refs] ID`. */
export function registerLogCommands(program: Command): void {
  program
    .command('logs')
    .description("a job's (or a run's) stdout and stderr as shipped to the API; readable after its node is gone")
    .argument('<id>', 'a job id, or a run id (run-…) for that run\'s attempt')
    .option('-f, --follow', 'keep printing as the attempt writes, until it ends; a LOST attempt re-queued is followed into the next one')
    .option('--attempt <n>', "which attempt (default: the job's current one)", attemptArg)
    .option('--rank <r>', "which member of a multi-node (gang) job: each rank's log is its own (default 0, a single-node job's only one)", rankArg)
    .addOption(new Option('--stream <name>', 'stdout, stderr, or all (both, interleaved by line)').choices(['stdout', 'stderr', 'all']).default('all'))
    .option('--refs', 'list where each stream was shipped from, its size and whether it is complete, instead of the log')
    .action(async (id: string, o: { follow?: boolean; attempt?: number; rank?: number; stream: LogStreamName; refs?: boolean }, cmd: Command) => {
      const client = clientOf(cmd);
      if (o.refs) {
        if (isRunId(id)) throw new Error('--refs takes a job id');
        const refs = await logRefs(client, id, o.attempt, o.rank);
        // A RANK column only where a gang shipped: a single-node job's table is as it always was.
        const ranked = refs.some((r) => r.rank > 0);
        const head = ranked ? ['ATTEMPT', 'RANK'] : ['ATTEMPT'];
        const lead = (r: (typeof refs)[number]) => (ranked ? [String(r.attempt), String(r.rank)] : [String(r.attempt)]);
        out(table([...head, 'STREAM', 'BYTES', 'COMPLETE', 'NODE', 'LOCATION'], refs.map((r) => [...lead(r), r.stream, String(r.size_bytes), r.complete ? 'yes' : 'no', r.node_id ?? '-', r.location ?? '-']), {}, 'no logs'));
        return;
      }
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'EPIPE') process.exit(0);
        throw err;
      });
      let attempt = o.attempt;
      let hinted = false;
      for (;;) {
        const log = await openLogs(client, id, { attempt, rank: o.rank, stream: o.stream, follow: o.follow });
        if (o.rank === undefined && log.nodes > 1 && !hinted) {
          // A gang: every member has a log of its own, and rank 0's is only one of them.
          process.stderr.write(`gpuctl: ${log.jobId}#${log.attempt} spans ${log.nodes} nodes; this is rank 0's log (--rank 1 to ${log.nodes - 1} for the others)\n`);
          hinted = true;
        }
        await pipeToStdout(log.body);
        // Followed without a fixed attempt: a LOST attempt re-queued goes on as the next one.
        if (!o.follow || o.attempt !== undefined || isRunId(id)) return;
        const job = await client.job(log.jobId);
        if (job.attempt <= log.attempt) return;
        process.stderr.write(`gpuctl: attempt ${log.attempt} ended (${job.attempts.find((a) => a.attempt === log.attempt)?.state ?? 'ended'}); following attempt ${job.attempt}\n`);
        attempt = job.attempt;
      }
    });
}
