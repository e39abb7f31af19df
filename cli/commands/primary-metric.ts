import { Command, InvalidArgumentError, Option } from 'commander';
import type { PrimaryMetricJson } from '../api-types.ts';
import { clientOf, out } from '../client-of.ts';

/** `gpuctl primary-metric PROJECT [EXPERIMENT] [--set NAME --goal min|max [--register MODEL [--alias A]] | --clear]`. */
export function registerPrimaryMetricCommand(program: Command): void {
  program
    .command('primary-metric')
    .description("show, set or clear the metric that decides a project's or experiment's best checkpoint")
    .argument('<project>', 'project name')
    .argument('[experiment]', 'experiment name (its setting overrides the project\'s)')
    .option('--set <metric>', 'the metric name, e.g. eval/accuracy')
    .addOption(new Option('--goal <goal>', 'with --set: whether lower or higher is better').choices(['min', 'max']))
    .option('--train-metric <metric>', 'with --set: the training-time metric shown beside it on the leaderboard and charts (default: eval/X ↔ train/X)')
    .option('--register <model>', "with --set on an experiment: keep its evaluated best registered as a version of this model, as its evaluations finish")
    .option('--alias <alias>', 'with --register: the alias that follows the evaluated best (default champion)')
    .option('--clear', 'remove the setting at this level (and an experiment\'s promotion)')
    .option('--json', 'print JSON')
    .action(async (project: string, experiment: string | undefined, o: { set?: string; goal?: 'min' | 'max'; trainMetric?: string; register?: string; alias?: string; clear?: boolean; json?: boolean }, cmd: Command) => {
      if (o.set && o.clear) throw new InvalidArgumentError('--set and --clear exclude each other');
      if (o.set && !o.goal) throw new InvalidArgumentError('--set needs --goal min or --goal max');
      if (o.goal && !o.set) throw new InvalidArgumentError('--goal goes with --set');
      if (o.trainMetric && !o.set) throw new InvalidArgumentError('--train-metric goes with --set');
      if (o.register && !(o.set && experiment)) throw new InvalidArgumentError('--register goes with --set on an experiment: gpuctl primary-metric PROJECT EXPERIMENT --set METRIC --goal min|max --register MODEL');
      if (o.alias && !o.register) throw new InvalidArgumentError('--alias goes with --register');
      const c = clientOf(cmd);
      const at = `/projects/${encodeURIComponent(project)}${experiment ? `/experiments/${encodeURIComponent(experiment)}` : ''}/primary-metric`;
      const r = o.set
        ? await c.request<PrimaryMetricJson>('PUT', at, {
            name: o.set,
            goal: o.goal,
            ...(o.trainMetric ? { train_metric: o.trainMetric } : {}),
            ...(o.register ? { register: o.register, ...(o.alias ? { alias: o.alias } : {}) } : {}),
          })
        : o.clear
          ? await c.request<PrimaryMetricJson>('DELETE', at)
          : await c.request<PrimaryMetricJson>('GET', `/primary-metric?${new URLSearchParams({ project, ...(experiment ? { experiment } : {}) })}`);
      const promote = r.promote
        ? `; its evaluated best is ${r.promote.model}@${r.promote.alias}${r.promote.version !== null ? ` (now version ${r.promote.version})` : ' (no evaluated best yet)'}`
        : '';
      out(o.json ? JSON.stringify(r) : `${r.goal === 'min' ? 'minimise' : 'maximise'} ${r.name} (from the ${r.level === 'default' ? 'global default' : r.level}); shown beside ${r.train_metric}${promote}`);
    });
}
