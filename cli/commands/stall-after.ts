import { Command, InvalidArgumentError } from 'commander';
import type { StallAfterJson } from '../api-types.ts';
import { durationArg } from '../args.ts';
import { clientOf, out } from '../client-of.ts';

/** `gpuctl stall-after PROJECT [--set SPAN | --clear]`. */
export function registerStallAfterCommand(program: Command): void {
  program
    .command('stall-after')
    .description("show, set or clear how long a project's running TRAIN and EVALUATE jobs may show no sign of life (no metric, no log output, cards under 5 %) before they are flagged stalled")
    .argument('<project>', 'project name')
    .option('--set <span>', 'e.g. 45m, 2h; off: never (a job\'s own --stall-after still applies)', durationArg('--set', 30 * 86_400))
    .option('--clear', "remove the project's setting: the plane's default (GPUPLANE_STALL_AFTER_S) applies again")
    .option('--json', 'print JSON')
    .action(async (project: string, o: { set?: number; clear?: boolean; json?: boolean }, cmd: Command) => {
      if (o.set !== undefined && o.clear) throw new InvalidArgumentError('--set and --clear exclude each other');
      const c = clientOf(cmd);
      const at = `/projects/${encodeURIComponent(project)}/stall-after`;
      const r =
        o.set !== undefined ? await c.request<StallAfterJson>('PUT', at, { stall_after_s: o.set }) : o.clear ? await c.request<StallAfterJson>('DELETE', at) : await c.request<StallAfterJson>('GET', at);
      out(o.json ? JSON.stringify(r) : `${r.project}: ${r.stall_after_s === 0 ? 'never stalled' : `stalled after ${r.stall_after_s} s`} (from the ${r.level === 'default' ? "plane's default" : 'project'}); a job's own --stall-after overrides it, and CUSTOM jobs have one only when they set it`);
    });
}
