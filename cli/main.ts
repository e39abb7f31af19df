import { Command, Option } from 'commander';
import { ApiError } from './client.ts';
import { registerCheckpointCommands } from './commands/checkpoints.ts';
import { registerEvalCommand } from './commands/eval.ts';
import { registerForkCommands } from './commands/fork.ts';
import { registerSweepCommands } from './commands/sweep.ts';
import { registerImportCommand } from './commands/import-run.ts';
import { registerJobCommands } from './commands/jobs.ts';
import { registerLogCommands } from './commands/logs.ts';
import { registerMcpCommand } from './commands/mcp.ts';
import { registerNodeCommand } from './commands/nodes.ts';
import { registerPrimaryMetricCommand } from './commands/primary-metric.ts';
import { registerStallAfterCommand } from './commands/stall-after.ts';
import { registerProcessCommands } from './commands/processes.ts';
import { registerProjectCommands } from './commands/projects.ts';
import { registerQuotaCommands } from './commands/quota.ts';
import { registerRetentionCommand } from './commands/retention.ts';
import { registerRunCommands } from './commands/runs.ts';
import { registerTokenCommands } from './commands/tokens.ts';
import { registerWebhookCommands } from './commands/webhooks.ts';

/**
 * The gpuctl program: its global options, then each group of commands from cli/commands/.
 * Every error is one line starting `gpuctl: `, commander's own (an unknown flag, a bad value)
 * as well as the API's and the actions' (main below).
 */
export function buildProgram(): Command {
  const program = new Command('gpuctl')
    .description('GPUPlane: run training jobs on your own GPU nodes')
    .addOption(new Option('--api <url>', 'API address').env('GPUPLANE_API_URL'))
    .addOption(new Option('--api-token <token>', "API token (else gpuctl login's, else gpuctl up's admin token in the home)").env('GPUPLANE_TOKEN'))
    .addOption(new Option('--home <dir>', 'where GPUPlane keeps its data').env('GPUPLANE_HOME'))
    .configureHelp({ helpWidth: 100 })
    .showHelpAfterError(false)
    // One line, with commander's suggestion kept on it: `gpuctl: unknown command 'sweps' (did you mean sweeps?)`.
    .configureOutput({ outputError: (s, write) => write(`${s.replace(/\n\(Did you mean/, ' (did you mean').split('\n')[0].replace(/^error: /, 'gpuctl: ')}\n`) });
  program.hook('preAction', (cmd) => {
    const home = cmd.optsWithGlobals<{ home?: string }>().home;
    if (home) process.env.GPUPLANE_HOME = home;
  });

  registerProcessCommands(program);
  registerJobCommands(program);
  registerNodeCommand(program);
  registerRunCommands(program);
  registerLogCommands(program);
  registerImportCommand(program);
  registerPrimaryMetricCommand(program);
  registerStallAfterCommand(program);
  registerRetentionCommand(program);
  registerQuotaCommands(program);
  registerProjectCommands(program);
  registerTokenCommands(program);
  registerCheckpointCommands(program);
  registerEvalCommand(program);
  registerWebhookCommands(program);
  registerForkCommands(program);
  registerSweepCommands(program);
  registerMcpCommand(program);
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
