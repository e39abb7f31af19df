/** The config edits `gpuctl retry` and `gpuctl fork` both take, read into the API's RetryBody. */
import { Option, type Command } from 'commander';
import type { RetryBody } from './api-types.ts';
import { intArg, memoryArg, pairArg, setArg } from './args.ts';

/** Adds --set, --gpus, --nodes, --gpus-per-node, --memory, --env, --selector and --priority to a command; `what` names the job or attempt they make. */
export function addConfigEditOptions(c: Command, what: string): Command {
  return c
    .addOption(new Option('--set <k=v>', `set a param for ${what} (repeatable; values as in submit --param)`).argParser(setArg).default({}, 'none'))
    .option('--gpus <n>', `cards for ${what} (on each node)`, intArg('--gpus', 0))
    .option('--nodes <n>', `nodes ${what} spans`, intArg('--nodes', 1))
    .option('--gpus-per-node <n>', 'the same as --gpus: cards on each node', intArg('--gpus-per-node', 0))
    .option('--memory <size>', `RAM ${what} may use on each node, in MiB or with a unit (512M, 8G); none: no limit`, memoryArg('--memory', true))
    .option('--env <K=V>', 'set an environment variable (repeatable)', pairArg)
    .option('--selector <k=v>', 'replace the node selector (repeatable)', pairArg)
    .option('--priority <p>', 'new priority', intArg('--priority', -1000));
}

/** The edits of addConfigEditOptions' options, as the body of a retry or a fork. */
export function configEditsOf(o: { set: Record<string, unknown>; gpus?: number; nodes?: number; gpusPerNode?: number; memory?: number | null; env?: Record<string, string>; selector?: Record<string, string>; priority?: number }): RetryBody {
  return {
    params: Object.keys(o.set).length ? o.set : undefined,
    gpus: o.gpus,
    nodes: o.nodes,
    gpus_per_node: o.gpusPerNode,
    memory_mb: o.memory,
    env: o.env,
    selector: o.selector,
    priority: o.priority,
  };
}
