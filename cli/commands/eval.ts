import { InvalidArgumentError, type Command } from 'commander';
import type { EvaluationJson, WireValue as MetricValue } from '../api-types.ts';
import { ApiError } from '../client.ts';
import { clientOf, out } from '../client-of.ts';
import { startEvaluation, waitForEvaluation } from '../client-evaluations.ts';
import { table } from '../table.ts';

/** Exit statuses of `gpuctl eval --wait` (as `gpuctl wait`). */
export const EVAL_EXIT = { succeeded: 0, failed: 3, cancelled: 4, timeout: 5 } as const;

function intArg(name: string, min: number, max: number) {
  return (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return Number(v);
  };
}
function pairArg(v: string, prev: Record<string, string> = {}) {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${v}"`);
  return { ...prev, [v.slice(0, i)]: v.slice(i + 1) };
}
const fmt = (v: MetricValue) => (typeof v === 'string' ? v : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6))));

/** An ended evaluation: its metrics as a table, or why it has none. */
export function renderEvaluation(e: EvaluationJson): string {
  const head = `${e.id} ${e.status}${e.reason ? `: ${e.reason}` : ''}`;
  if (!e.metrics) return head;
  return `${head}\n${table(['METRIC', 'VALUE'], Object.entries(e.metrics).map(([k, v]) => [k, fmt(v)]))}`;
}

/** `gpuctl eval CKPT [-- CMD...]`. */
export function registerEvalCommand(program: Command): void {
  program
    .command('eval')
    .description("evaluate a checkpoint as an EVALUATE job (the training job's eval command unless one is given after --); prints the evaluation id and job id")
    .argument('<checkpoint>', 'checkpoint id')
    .argument('[command...]', 'the eval command, after --')
    .option('--gpus <n>', "cards (default the training job's)", intArg('--gpus', 0, 64))
    .option('--env <K=V>', "environment variable, over the training job's (repeatable)", pairArg)
    .option('--selector <k=v>', "node label the job needs (default the training job's; repeatable)", pairArg)
    .option('--workdir <dir>', "working directory on the node (default the training job's)")
    .option('--wait', 'wait for the result and print its metrics; exit 3 failed, 4 cancelled, 5 timed out')
    .option('--timeout <s>', 'with --wait, give up after S seconds', intArg('--timeout', 1, 365 * 24 * 3600))
    .option('--json', 'print the evaluation as JSON')
    .action(async (checkpoint: string, command: string[], o: { gpus?: number; env?: Record<string, string>; selector?: Record<string, string>; workdir?: string; wait?: boolean; timeout?: number; json?: boolean }, cmd: Command) => {
      const c = clientOf(cmd);
      const e = await startEvaluation(c, checkpoint, {
        command: command.length ? command : undefined,
        gpus: o.gpus,
        env: o.env,
        selector: o.selector,
        working_dir: o.workdir ? (await import('node:path')).resolve(o.workdir) : undefined,
      });
      if (!o.wait) {
        out(o.json ? JSON.stringify(e, null, 2) : `evaluation ${e.id} job ${e.job_id}`);
        return;
      }
      if (!o.json) out(`evaluation ${e.id} job ${e.job_id}`);
      let done: EvaluationJson;
      try {
        done = await waitForEvaluation(c, e.id, (o.timeout ?? 365 * 24 * 3600) * 1000);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        process.stderr.write(`gpuctl: ${(err as Error).message}\n`);
        process.exit(EVAL_EXIT.timeout);
      }
      out(o.json ? JSON.stringify(done, null, 2) : renderEvaluation(done));
      process.exit(EVAL_EXIT[done.status as 'succeeded' | 'failed' | 'cancelled'] ?? 1);
    });
}
