import { Command, InvalidArgumentError, Option } from 'commander';
import { loadConfig } from '../config.ts';
import { passEnvRefusal } from '../domain/job-env.ts';
import { JOB_STATES, JOB_TYPES } from '../domain/job-states.ts';
import { ApiError, type JobDetailJson } from './client.ts';
import { clientOf } from './client-of.ts';
import { registerCheckpointCommands } from './commands/checkpoints.ts';
import { registerEvalCommand } from './commands/eval.ts';
import { registerImportCommand } from './commands/import-run.ts';
import { registerLogCommands } from './commands/logs.ts';
import { registerPrimaryMetricCommand } from './commands/primary-metric.ts';
import { registerRetentionCommand } from './commands/retention.ts';
import { registerRunCommands } from './commands/runs.ts';
import { registerTokenCommands } from './commands/tokens.ts';
import { createLogger, LOG_LEVELS, type LogLevel } from '../runtime/logger.ts';
import { renderJob, renderJobs, renderNodes } from './render.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);

function intArg(name: string, min: number) {
  return (v: string) => {
    if (!/^-?\d+$/.test(v) || Number(v) < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    return Number(v);
  };
}
/** `--set lr=0.01` → {lr: 0.01}: JSON values where they parse (numbers, true, null, "x"), else strings. */
function setArg(v: string, prev: Record<string, unknown> = {}) {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${v}"`);
  const raw = v.slice(i + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // A plain string.
  }
  return { ...prev, [v.slice(0, i)]: value };
}
function pairArg(v: string, prev: Record<string, string> = {}) {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${v}"`);
  return { ...prev, [v.slice(0, i)]: v.slice(i + 1) };
}

/** `--pass-env NAME`, repeatable; a name that looks like a secret is refused, not silently dropped. */
function envNameArg(v: string, prev: string[] = []) {
  const refused = passEnvRefusal(v);
  if (refused) throw new InvalidArgumentError(refused);
  return [...prev, v];
}

/** `--allowed-root DIR`, repeatable; GPUPLANE_ALLOWED_ROOTS holds several, ':'-separated, as PATH does. */
function rootsArg(v: string, prev: string[] = []) {
  return [...prev, ...v.split(':').filter(Boolean)];
}

/**
 * `--secret-env NAME`: the value comes from gpuctl's environment, never from the command line,
 * where `ps` and the shell's history would keep it.
 */
function secretArg(v: string, prev: Record<string, string> = {}) {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(v)) throw new InvalidArgumentError(`expected a variable name (its value is read from this environment), got "${v.split('=')[0]}..."`);
  const value = process.env[v];
  if (value === undefined) throw new InvalidArgumentError(`${v} is not set in this environment: export it first (its value is sent, not the name)`);
  return { ...prev, [v]: value };
}

/** `--eval-when each | every:N | final`. */
function evalWhenArg(v: string): { when: 'each' | 'every' | 'final'; n?: number } {
  if (v === 'each' || v === 'final') return { when: v };
  const m = /^every:([1-9]\d{0,5})$/.exec(v);
  if (m) return { when: 'every', n: Number(m[1]) };
  throw new InvalidArgumentError('expected each, final or every:N');
}

/** Exit statuses of `gpuctl wait`. */
export const WAIT_EXIT = { SUCCEEDED: 0, FAILED: 3, CANCELLED: 4, TIMEOUT: 5 } as const;


export function buildProgram(): Command {
  const program = new Command('gpuctl')
    .description('GPUPlane: run training jobs on your own GPU nodes')
    .addOption(new Option('--api <url>', 'API address').env('GPUPLANE_API_URL'))
    .addOption(new Option('--api-token <token>', "API token (else gpuctl login's, else gpuctl up's admin token in the home)").env('GPUPLANE_TOKEN'))
    .addOption(new Option('--home <dir>', 'where GPUPlane keeps its data').env('GPUPLANE_HOME'))
    .configureHelp({ helpWidth: 100 })
    .showHelpAfterError(false)
    .configureOutput({ outputError: (s, write) => write(s.split('\n')[0] + '\n') });
  program.hook('preAction', (cmd) => {
    const home = cmd.optsWithGlobals<{ home?: string }>().home;
    if (home) process.env.GPUPLANE_HOME = home;
  });

  const logLevel = () =>
    new Option('--log-level <level>', 'log at this level and above (JSON lines on stderr)').choices(LOG_LEVELS).default('info').env('GPUPLANE_LOG_LEVEL');
  const agentOptions = (c: Command) =>
    c
      .option('--label <k=v>', 'a node label (repeatable)', pairArg, {})
      .option('--fake-gpus <n>', 'pretend to have N cards (no nvidia-smi needed)', intArg('--fake-gpus', 0))
      .option('--pass-env <name>', "also give jobs this variable of the agent's environment (repeatable; never one named like a secret)", envNameArg, [])
      .addOption(
        new Option('--allowed-root <dir>', "jobs' working dirs and checkpoint folders must resolve inside this folder (repeatable; without one the agent warns at start)")
          .env('GPUPLANE_ALLOWED_ROOTS')
          .argParser(rootsArg)
          .default([], 'anywhere'),
      )
      .addOption(logLevel());

  agentOptions(
    program
      .command('up')
      .description('start Temporal (the dev server, or with --temporal cluster a real server on PostgreSQL), the API, the control worker and one local agent; embedded defaults')
      .option('--node-id <id>', 'the local agent\'s node id (default: hostname)')
      .option('--temporal-ui-port <port>', 'Temporal Web UI port', intArg('--temporal-ui-port', 1), 8233)
      .addOption(
        new Option('--temporal <kind>', 'dev: the Temporal CLI dev server (SQLite in GPUPLANE_HOME); cluster: a real temporal-server with its persistence and visibility in the DATABASE_URL PostgreSQL (built once with go install)')
          .choices(['dev', 'cluster'])
          .default('dev'),
      )
      .option('--history-shards <n>', 'with --temporal cluster: history shards, fixed once its databases exist', intArg('--history-shards', 1), 4),
  ).action(async (o: { nodeId?: string; label: Record<string, string>; fakeGpus?: number; passEnv: string[]; allowedRoot: string[]; temporalUiPort: number; temporal: 'dev' | 'cluster'; historyShards: number; logLevel: LogLevel }) => {
    const { up } = await import('./up.ts');
    await up(
      loadConfig(),
      { nodeId: o.nodeId, labels: o.label, fakeGpus: o.fakeGpus, passEnv: o.passEnv, allowedRoots: o.allowedRoot, temporalUiPort: o.temporalUiPort, temporal: o.temporal, historyShards: o.historyShards },
      log,
      createLogger(o.logLevel),
    );
  });

  agentOptions(
    program
      .command('agent')
      .description('run a GPU-host worker for this node')
      .requiredOption('--node-id <id>', 'this node\'s id')
      .addOption(new Option('--token <token>', "this node's credential, from the API (prefer the variable: a flag shows in ps)").env('GPUPLANE_NODE_TOKEN'))
      .addOption(
        new Option('--on-stop <mode>', 'on SIGTERM/SIGINT: detach leaves running jobs for a restarted agent to re-attach; kill stops them')
          .choices(['detach', 'kill'])
          .default('detach'),
      ),
  ).action(async (o: { nodeId: string; label: Record<string, string>; fakeGpus?: number; passEnv: string[]; allowedRoot: string[]; token?: string; onStop: 'detach' | 'kill'; logLevel: LogLevel }) => {
    const { serveAgent } = await import('../workers/gpu-host/serve.ts');
    // Read once: nothing the agent starts (nvidia-smi, jobs) inherits the node's credential.
    delete process.env.GPUPLANE_NODE_TOKEN;
    await serveAgent(
      loadConfig(),
      { nodeId: o.nodeId, labels: o.label, fakeGpus: o.fakeGpus, passEnv: o.passEnv, allowedRoots: o.allowedRoot, nodeToken: o.token || undefined, onStop: o.onStop },
      log,
      createLogger(o.logLevel),
    );
  });

  program
    .command('api')
    .description('run the API server alone (needs DATABASE_URL)')
    .addOption(logLevel())
    .action(async (o: { logLevel: LogLevel }) => {
      const { serveApi } = await import('../api/serve.ts');
      await serveApi(loadConfig(), log, createLogger(o.logLevel));
    });

  program
    .command('control-worker')
    .description('run the control worker alone (needs DATABASE_URL)')
    .addOption(logLevel())
    .action(async (o: { logLevel: LogLevel }) => {
      const { serveControl } = await import('../workers/control/serve.ts');
      await serveControl(loadConfig(), log, createLogger(o.logLevel));
    });

  program
    .command('submit')
    .description('submit a job; prints its id on the last line')
    .addOption(new Option('--type <type>', 'job type').choices(JOB_TYPES).default('TRAIN'))
    .option('--gpus <n>', 'cards, all on one node', intArg('--gpus', 0), 1)
    .option('--selector <k=v>', 'node label the job needs (repeatable)', pairArg, {})
    .option('--priority <p>', 'higher runs first', intArg('--priority', -1000), 0)
    .option('--workdir <dir>', 'working directory on the node (default: here)')
    .option('--env <K=V>', 'environment variable (repeatable)', pairArg, {})
    .option('--secret-env <NAME>', "a secret variable: its value is taken from gpuctl's own environment and never shown again (repeatable)", secretArg, {})
    .option('--param <k=v>', 'a parameter recorded with the job (repeatable)', pairArg, {})
    .option('--project <name>', 'project')
    .option('--experiment <name>', 'experiment within the project')
    .addOption(new Option('--on-lost <policy>', 'what a lost node does to it').choices(['requeue', 'fail']))
    .option('--watch <dir>', 'checkpoint folder to register from while the job runs, relative to the working dir')
    .option('--resume-from <ckpt>', 'id of the checkpoint the job resumes from (the parent of its first checkpoint)')
    .option('--eval <command>', 'evaluate its checkpoints with this command (run by /bin/sh -c as an EVALUATE job; needs --watch)')
    .option('--eval-when <when>', 'with --eval: each | every:N | final', evalWhenArg, { when: 'each' })
    .option('--json', 'print the whole job as JSON')
    .argument('<command...>', 'the command, after --')
    .action(async (command: string[], o, cmd: Command) => {
      if (o.eval && !o.watch) throw new InvalidArgumentError('--eval needs --watch: its checkpoints are what it evaluates');
      const job = await clientOf(cmd).submit({
        type: o.type,
        command,
        gpus: o.gpus,
        selector: o.selector,
        priority: o.priority,
        working_dir: o.workdir ? (await import('node:path')).resolve(o.workdir) : process.cwd(),
        env: o.env,
        ...(Object.keys(o.secretEnv).length ? { secret_env: o.secretEnv } : {}),
        params: o.param,
        project: o.project,
        experiment: o.experiment,
        on_lost: o.onLost,
        watch_dir: o.watch,
        resume_from: o.resumeFrom,
        ...(o.eval ? { eval_policy: { ...o.evalWhen, command: ['/bin/sh', '-c', o.eval] } } : {}),
      });
      if (o.json) log(JSON.stringify(job, null, 2));
      else log(job.id);
    });

  program
    .command('jobs')
    .description('list jobs, newest first')
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
    .option('--json', 'print the final job as JSON')
    .action(async (id: string, o: { timeout?: number; json?: boolean }, cmd: Command) => {
      const client = clientOf(cmd);
      let j: JobDetailJson;
      try {
        j = await client.waitFor(id, undefined, o.timeout ? o.timeout * 1000 : 365 * 24 * 3600 * 1000, 500);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        process.stderr.write(`gpuctl: ${(err as Error).message}\n`);
        process.exit(WAIT_EXIT.TIMEOUT);
      }
      if (o.json) log(JSON.stringify(j, null, 2));
      else log(`${j.id} ${j.state}${j.reason ? `: ${j.reason}` : ''}`);
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

  program
    .command('retry')
    .description('retry a FAILED, CANCELLED or LOST job as its next attempt, after editing its config')
    .argument('<id>')
    .option('--set <k=v>', 'set a param for the new attempt (repeatable; JSON values)', setArg, {})
    .option('--gpus <n>', 'cards for the new attempt', intArg('--gpus', 0))
    .option('--env <K=V>', 'set an environment variable (repeatable)', pairArg)
    .option('--selector <k=v>', 'replace the node selector (repeatable)', pairArg)
    .option('--priority <p>', 'new priority', intArg('--priority', -1000))
    .option('--json', 'print the job as JSON')
    .action(async (id: string, o, cmd: Command) => {
      const j = await clientOf(cmd).retry(id, {
        params: Object.keys(o.set).length ? o.set : undefined,
        gpus: o.gpus,
        env: o.env,
        selector: o.selector,
        priority: o.priority,
      });
      if (o.json) log(JSON.stringify(j, null, 2));
      else {
        const last = j.attempts.at(-1)!;
        log(`${j.id}: attempt ${j.attempt} created${last.changes.length ? ` (${last.changes.map((c) => `${c.key} ${JSON.stringify(c.from)} → ${JSON.stringify(c.to)}`).join(', ')})` : ' (same config)'}`);
      }
    });

  program
    .command('nodes')
    .description('nodes, their cards and who owns each')
    .option('--json', 'JSON output')
    .action(async (o, cmd: Command) => {
      const nodes = await clientOf(cmd).nodes();
      if (o.json) {
        log(JSON.stringify(nodes, null, 2));
        return;
      }
      log(renderNodes(nodes));
    });

  registerRunCommands(program);
  registerLogCommands(program);
  registerImportCommand(program);
  registerPrimaryMetricCommand(program);
  registerRetentionCommand(program);
  registerTokenCommands(program);
  registerCheckpointCommands(program);
  registerEvalCommand(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    const msg = err instanceof ApiError ? `${err.message}${err.status ? ` (HTTP ${err.status})` : ''}` : (err as Error).message;
    process.stderr.write(`gpuctl: ${msg.split('\n')[0]}\n`);
    process.exit(1);
  }
}
