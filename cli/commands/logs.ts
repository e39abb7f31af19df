import { once } from 'node:events';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { isRunId, logRefs, openLogs, type LogStreamName } from '../client-logs.ts';
import { clientOf, out } from '../client-of.ts';
import { table } from '../table.ts';

const attemptArg = (v: string) => {
  if (!/^[1-9]\d{0,8}$/.test(v)) throw new InvalidArgumentError('the attempt must be an integer >= 1');
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

/** `gpuctl logs [-f] [--attempt N] [--stream S] [--refs] ID`. */
export function registerLogCommands(program: Command): void {
  program
    .command('logs')
    .description("a job's (or a run's) stdout and stderr as shipped to the API; readable after its node is gone")
    .argument('<id>', 'a job id, or a run id (run-…) for that run\'s attempt')
    .option('-f, --follow', 'keep printing as the attempt writes, until it ends; a LOST attempt re-queued is followed into the next one')
    .option('--attempt <n>', "which attempt (default: the job's current one)", attemptArg)
    .addOption(new Option('--stream <name>', 'stdout, stderr, or all (both, interleaved by line)').choices(['stdout', 'stderr', 'all']).default('all'))
    .option('--refs', 'list where each stream was shipped from, its size and whether it is complete, instead of the log')
    .action(async (id: string, o: { follow?: boolean; attempt?: number; stream: LogStreamName; refs?: boolean }, cmd: Command) => {
      const client = clientOf(cmd);
      if (o.refs) {
        if (isRunId(id)) throw new Error('--refs takes a job id');
        const refs = await logRefs(client, id, o.attempt);
        out(table(['ATTEMPT', 'STREAM', 'BYTES', 'COMPLETE', 'NODE', 'LOCATION'], refs.map((r) => [String(r.attempt), r.stream, String(r.size_bytes), r.complete ? 'yes' : 'no', r.node_id ?? '-', r.location ?? '-']), {}, 'no logs'));
        return;
      }
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'EPIPE') process.exit(0);
        throw err;
      });
      let attempt = o.attempt;
      for (;;) {
        const log = await openLogs(client, id, { attempt, stream: o.stream, follow: o.follow });
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
