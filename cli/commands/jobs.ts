/** The job commands: `gpuctl submit`, `jobs`, `job`, `wait`, `cancel` and `retry`. */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { JOB_STATES } from '../../domain/job-states.ts';
import { JOB_TYPES, TRAINING_JOB_TYPE } from '../../domain/job-types.ts';
import type { JobDetailJson, JobJson } from '../api-types.ts';
import { durationArg, evalWhenArg, intArg, memoryArg, pairArg, PARAM_VALUE_RULE, secretArg, setArg } from '../args.ts';
import { ApiError } from '../client.ts';
import { clientOf } from '../client-of.ts';
import { addCodeOptions, codeOption, refuseCodeWithWorkdir } from '../client-code.ts';
import { addConfigEditOptions, configEditsOf } from '../config-edit-options.ts';
import { addPythonEnvOption, pythonEnvOption } from '../python-env-option.ts';
import { imageOption, imageOptionFor } from '../image-option.ts';
import { renderJob, renderJobs, submitWarning } from '../render.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);

/** Exit statuses of `gpuctl wait`. */
export const WAIT_EXIT = { SUCCEEDED: 0, FAILED: 3, CANCELLED: 4, TIMEOUT: 5 } as const;

/** "evaluations: 3 SUCCEEDED, 1 FAILED" (or "no evaluations"). */
export function evaluationCount(evals: JobJson[]): string {
  if (evals.length === 0) return 'no evaluations';
  const by = new Map<string, number>();
  for (const e of evals) by.set(e.state, (by.get(e.state) ?? 0) + 1);
  return `evaluations: ${[...by.entries()].map(([state, n]) => `${n} ${state}`).join(', ')}`;
}

export function registerJobCommands(program: Command): void {
  addPythonEnvOption(
    addCodeOptions(
      program
        .command('submit')
      .description('submit a job; prints its id on the last line')
      .addOption(new Option('--type <type>', 'job type').choices(JOB_TYPES).default(TRAINING_JOB_TYPE))
      .addOption(new Option('--gpus <n>', 'cards, all on one node').argParser(intArg('--gpus', 0)).default(undefined, '1'))
      .option('--nodes <n>', 'nodes the job spans: more than 1 runs it on N nodes at once, started and stopped together (with --gpus-per-node)', intArg('--nodes', 1))
      .option('--gpus-per-node <n>', 'cards on each node of a multi-node job (default 1)', intArg('--gpus-per-node', 0))
      .option('--memory <size>', "RAM the job may use on each node, in MiB or with a unit (512M, 8G); past it the OOM killer ends it (default: no limit; a node without a memory controller runs it unlimited)", memoryArg('--memory'))
      .addOption(new Option('--selector <k=v>', 'node label the job needs (repeatable)').argParser(pairArg).default({}, 'none'))
      .option('--priority <p>', 'higher runs first', intArg('--priority', -1000), 0)
        .option('--workdir <dir>', 'working directory on the node (default: here; not with --code)'),
      'the job',
    ),
    'the job',
  )
    .addOption(imageOptionFor('the job'))
    .addOption(new Option('--env <K=V>', 'environment variable (repeatable)').argParser(pairArg).default({}, 'none'))
    .addOption(new Option('--secret-env <NAME>', "a secret variable: its value is taken from gpuctl's own environment and never shown again (repeatable)").argParser(secretArg).default({}, 'none'))
    .addOption(new Option('--param <k=v>', `a parameter recorded with the job (repeatable; ${PARAM_VALUE_RULE})`).argParser(setArg).default({}, 'none'))
    .option('--project <name>', 'project')
    .option('--experiment <name>', 'experiment within the project')
    .addOption(new Option('--on-lost <policy>', 'what a lost node does to it').choices(['requeue', 'fail']))
    .option('--no-preempt', "never preempt it (an admin token, or a job within its project's quota)")
    .option('--preempt-grace <s>', 'seconds between a preemption\'s SIGTERM and SIGKILL, to save a checkpoint in (default: the plane\'s, 30)', intArg('--preempt-grace', 0, 86_400))
    .option('--stall-after <span>', 'flag it stalled after this long with no metric logged, no log output and its cards under 5 % (90s, 30m, 2h; off: never; default: the plane\'s, 30m, none for CUSTOM jobs)', durationArg('--stall-after', 30 * 86_400))
    .addOption(new Option('--on-stall <action>', 'what a stall does: tell (an event and a badge), kill (FAILED "stalled"), requeue (the next attempt)').choices(['tell', 'kill', 'requeue']))
    .option('--watch <dir>', 'checkpoint folder to register from while the job runs, relative to the working dir (no .. segment)')
    .option('--resume-from <ckpt>', 'id of the checkpoint the job resumes from (given as GPUPLANE_RESUME_FROM, the parent of its first checkpoint)')
    .option('--eval <command>', 'evaluate its checkpoints with this command (run by /bin/sh -c as an EVALUATE job; needs --watch)')
    .addOption(new Option('--eval-when <when>', 'with --eval: each | every:N | final').argParser(evalWhenArg).default({ when: 'each' }, 'each'))
    .option('--json', 'print the whole job as JSON')
    .argument('<command...>', 'the command, after --')
    .action(async (command: string[], o, cmd: Command) => {
      if (o.eval && !o.watch) throw new InvalidArgumentError('--eval needs --watch: its checkpoints are what it evaluates');
      refuseCodeWithWorkdir(o);
      const pythonEnv = pythonEnvOption(o);
      const client = clientOf(cmd);
      // Snapshotted and uploaded first (nothing is sent for a folder that is missing or over the limit).
      const { code } = await codeOption(client, o, async () => o.project);
      const job = await client.submit({
        type: o.type,
        command,
        gpus: o.gpus,
        nodes: o.nodes,
        gpus_per_node: o.gpusPerNode,
        ...(o.memory !== undefined ? { memory_mb: o.memory } : {}),
        selector: o.selector,
        priority: o.priority,
        ...(code ? { code } : { working_dir: o.workdir ? (await import('node:path')).resolve(o.workdir) : process.cwd() }),
        env: o.env,
        ...(Object.keys(o.secretEnv).length ? { secret_env: o.secretEnv } : {}),
        ...pythonEnv,
        ...imageOption(o),
        params: o.param,
        project: o.project,
        experiment: o.experiment,
        on_lost: o.onLost,
        ...(o.preempt === false ? { preemptible: false } : {}),
        ...(o.preemptGrace !== undefined ? { preempt_grace_s: o.preemptGrace } : {}),
        ...(o.stallAfter !== undefined ? { stall_after_s: o.stallAfter } : {}),
        ...(o.onStall ? { on_stall: o.onStall } : {}),
        watch_dir: o.watch,
        resume_from: o.resumeFrom,
        ...(o.eval ? { eval_policy: { ...o.evalWhen, command: ['/bin/sh', '-c', o.eval] } } : {}),
      });
      const warning = submitWarning(job);
      if (warning) process.stderr.write(`${warning}\n`);
      if (o.json) log(JSON.stringify(job, null, 2));
      else log(job.id);
    });

  program
    .command('jobs')
    .description("list jobs, newest first; a QUEUED job's REASON says why it waits")
    .addOption(new Option('--state <state>', 'only this state').choices(JOB_STATES))
    .addOption(new Option('--type <type>', 'only this type').choices(JOB_TYPES))
    .option('--project <name>', 'only this project')
    .option('--limit <n>', 'at most N', intArg('--limit', 1), 100)
    .option('--json', 'JSON output')
    .action(async (o, cmd: Command) => {
      const jobs = await clientOf(cmd).jobs({ state: o.state, type: o.type, project: o.project, limit: o.limit });
      if (o.json) log(JSON.stringify(jobs, null, 2));
      else log(renderJobs(jobs));
    });

  program
    .command('job')
    .description('one job with its attempts and history')
    .argument('<id>')
    .option('--json', 'JSON output')
    .action(async (id: string, o, cmd: Command) => {
      const j = await clientOf(cmd).job(id);
      if (o.json) log(JSON.stringify(j, null, 2));
      else log(renderJob(j));
    });

  program
    .command('wait')
    .description(`block until the job ends; exit ${WAIT_EXIT.SUCCEEDED} SUCCEEDED, ${WAIT_EXIT.FAILED} FAILED, ${WAIT_EXIT.CANCELLED} CANCELLED, ${WAIT_EXIT.TIMEOUT} timed out`)
    .argument('<id>')
    .option('--timeout <s>', 'give up after S seconds', intArg('--timeout', 1))
    .option('--evaluations', "then also wait for the evaluations of its checkpoints to end, and count them (the exit status stays the job's)")
    .option('--json', 'print the final job as JSON')
    .action(async (id: string, o: { timeout?: number; evaluations?: boolean; json?: boolean }, cmd: Command) => {
      const client = clientOf(cmd);
      const timeoutMs = o.timeout ? o.timeout * 1000 : 365 * 24 * 3600 * 1000;
      const deadline = Date.now() + timeoutMs;
      let j: JobDetailJson;
      let evals: JobJson[] | null = null;
      try {
        j = await client.waitFor(id, undefined, timeoutMs, 500);
        if (o.evaluations) evals = await client.waitForEvaluations(id, deadline, 500);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        process.stderr.write(`gpuctl: ${(err as Error).message}\n`);
        process.exit(WAIT_EXIT.TIMEOUT);
      }
      if (o.json) log(JSON.stringify(evals ? { ...j, evaluations: evals } : j, null, 2));
      else {
        log(`${j.id} ${j.state}${j.reason ? `: ${j.reason}` : ''}`);
        if (evals) log(evaluationCount(evals));
      }
      process.exit(WAIT_EXIT[j.state as 'SUCCEEDED' | 'FAILED' | 'CANCELLED']);
    });

  program
    .command('cancel')
    .description('cancel a job that has not ended')
    .argument('<id>')
    .option('--json', 'JSON output')
    .action(async (id: string, o, cmd: Command) => {
      const j = await clientOf(cmd).cancel(id);
      if (o.json) log(JSON.stringify(j, null, 2));
      else log(`${j.id}: cancel requested (was ${j.state})`);
    });

  addPythonEnvOption(
    addCodeOptions(
      addConfigEditOptions(program.command('retry').description('retry a FAILED, CANCELLED or LOST job as its next attempt, after editing its config').argument('<id>'), 'the new attempt'),
      'the new attempt',
    ),
    'the new attempt',
  )
    .addOption(imageOptionFor('the new attempt'))
    .option('--json', 'print the job as JSON')
    .action(async (id: string, o, cmd: Command) => {
      const client = clientOf(cmd);
      // Uploaded to the job's own project first (nothing is retried when the folder is refused).
      const j = await client.retry(id, { ...configEditsOf(o), ...pythonEnvOption(o), ...imageOption(o), ...(await codeOption(client, o, async () => (await client.job(id)).project)) });
      if (o.json) log(JSON.stringify(j, null, 2));
      else {
        const last = j.attempts.at(-1)!;
        log(`${j.id}: attempt ${j.attempt} created${last.changes.length ? ` (${last.changes.map((c) => `${c.key} ${JSON.stringify(c.from)} → ${JSON.stringify(c.to)}`).join(', ')})` : ' (same config)'}`);
      }
    });
}
