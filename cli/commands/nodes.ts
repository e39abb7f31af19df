/** `gpuctl nodes`: the nodes, their cards and who owns each; `gpuctl node drain|resume|remove|envs`. */
import type { Command } from 'commander';
import type { NodeJson } from '../client.ts';
import { clientOf } from '../client-of.ts';
import { renderNodes } from '../render.ts';
import { renderNodeEnvs } from '../render-node-envs.ts';

const log = (s: string): void => void process.stdout.write(`${s}\n`);

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

  const node = program.command('node').description("node operations (admins): drain a node, resume it, remove one gone for good, list its Python environments");
  node
    .command('drain')
    .description('place nothing new on a node; its running jobs run on and finish. Kept until resumed, across restarts; draining it again keeps when and by whom, and takes a new --reason')
    .argument('<node>', 'node id (gpuctl nodes)')
    .option('--reason <text>', 'why (shown by gpuctl nodes and the console)')
    .option('--preempt', 'preempt the jobs running on it now (each with its grace): they are re-queued and resume elsewhere from their latest checkpoint')
    .option('--json', 'print the node as JSON')
    .action(async (id: string, o: { reason?: string; preempt?: boolean; json?: boolean }, cmd: Command) => {
      const n = await clientOf(cmd).drainNode(id, o.reason, o.preempt === true);
      if (o.json) return log(JSON.stringify(n, null, 2));
      log(`node ${n.id} drained${n.drained?.reason ? `: ${n.drained.reason}` : ''}; ${o.preempt ? preempting(n) : running(n)}`);
    });
  node
    .command('resume')
    .description('let the scheduler place jobs on a drained node again (a no-op on a node not drained)')
    .argument('<node>', 'node id (gpuctl nodes)')
    .option('--json', 'print the node as JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const n = await clientOf(cmd).resumeNode(id);
      if (o.json) return log(JSON.stringify(n, null, 2));
      log(`node ${n.id} takes jobs again (${n.status})`);
    });
  node
    .command('remove')
    .description('remove a node that is gone for good: its cards and its liveness workflow go too. Refused while it is ONLINE (stop its agent first) or holds attempts')
    .argument('<node>', 'node id (gpuctl nodes)')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const r = await clientOf(cmd).removeNode(id);
      log(o.json ? JSON.stringify(r) : `node ${r.id} removed`);
    });
  node
    .command('envs')
    .description("the Python environments a node holds in its cache (as its agent last reported them): key, kind, the file's sha256, size, built, last used, and how many running jobs use each")
    .argument('<node>', 'node id (gpuctl nodes)')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const r = await clientOf(cmd).nodeEnvs(id);
      log(o.json ? JSON.stringify(r, null, 2) : renderNodeEnvs(r));
    });
}

/** What a drain --preempt stops, in words. */
function preempting(n: NodeJson): string {
  const jobs = new Set(n.gpus.filter((g) => g.busy).map((g) => g.owner_job_id ?? 'busy'));
  return jobs.size === 0 ? 'nothing runs on it' : `${jobs.size} job(s) preempted, to resume elsewhere: ${[...jobs].join(', ')}`;
}

/** What still runs on a drained node, in words. */
function running(n: NodeJson): string {
  const jobs = new Set(n.gpus.filter((g) => g.busy).map((g) => g.owner_job_id ?? 'busy'));
  return jobs.size === 0 ? 'nothing runs on it' : `${jobs.size} job(s) still run on it and finish: ${[...jobs].join(', ')}`;
}
