import { Command, InvalidArgumentError } from 'commander';
import type { RetentionJson } from '../api-types.ts';
import { clientOf, out } from '../client-of.ts';

function count(v: string): number {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a whole number`);
  return Number(v);
}

/** `gpuctl retention PROJECT EXPERIMENT [--keep-best K] [--keep-latest N] | [--off]`. */
export function registerRetentionCommand(program: Command): void {
  program
    .command('retention')
    .description("show or set an experiment's checkpoint retention: keep each run's best K and latest N, delete the others' files")
    .argument('<project>', 'project name')
    .argument('<experiment>', 'experiment name')
    .option('--keep-best <k>', 'keep the K best checkpoints of each run by the primary metric (the best is always kept)', count)
    .option('--keep-latest <n>', 'keep the N most recent checkpoints of each run', count)
    .option('--off', 'turn retention off: every checkpoint is kept')
    .option('--json', 'print JSON')
    .action(async (project: string, experiment: string, o: { keepBest?: number; keepLatest?: number; off?: boolean; json?: boolean }, cmd: Command) => {
      const setting = o.keepBest !== undefined || o.keepLatest !== undefined;
      if (setting && o.off) throw new InvalidArgumentError('--off excludes --keep-best and --keep-latest');
      const c = clientOf(cmd);
      const at = `/projects/${encodeURIComponent(project)}/experiments/${encodeURIComponent(experiment)}/retention`;
      const r =
        setting || o.off
          ? await c.request<RetentionJson>('PUT', at, { keep_best: o.off ? null : (o.keepBest ?? null), keep_latest: o.off ? null : (o.keepLatest ?? null) })
          : await c.request<RetentionJson>('GET', at);
      if (o.json) return out(JSON.stringify(r));
      if (r.keep_best === null && r.keep_latest === null) return out('retention off: every checkpoint is kept');
      const parts = [`the best ${Math.max(1, r.keep_best ?? 0)}`, ...(r.keep_latest ? [`the latest ${r.keep_latest}`] : [])];
      out(`each run keeps ${parts.join(' and ')} checkpoints (and any under evaluation or resumed from); the others' files are deleted`);
    });
}
