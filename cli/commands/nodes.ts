/** `gpuctl nodes`: the nodes, their cards and who owns each. */
import type { Command } from 'commander';
import { clientOf } from '../client-of.ts';
import { renderNodes } from '../render.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);

export function registerNodeCommand(program: Command): void {
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
}
