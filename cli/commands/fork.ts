/** `gpuctl fork CKPT` and `gpuctl lineage RUN|CKPT`. */
import type { Command } from 'commander';
import type { ForkedJobJson, LineageJson } from '../api-types.ts';
import { addConfigEditOptions, configEditsOf } from '../config-edit-options.ts';
import { clientOf, out } from '../client-of.ts';
import { forkCheckpoint, lineage } from '../client-fork.ts';
import { addCodeOptions, codeOption, refuseCodeWithWorkdir } from '../client-code.ts';
import { addPythonEnvOption, pythonEnvOption } from '../python-env-option.ts';
import { imageOption, imageOptionFor } from '../image-option.ts';
import { getCheckpoint } from '../client-checkpoints.ts';
import { getRun } from '../client-runs.ts';

type Change = ForkedJobJson['changes'][number];
/**
 * A change against what the parent job was given ("not given" where it gave none), and beside a
 * param what the parent's run logged, where that says more: `params.lr not given (run logged 0.02) → 0.005`.
 */
export function changeLine(cs: Change[]): string {
  return cs
    .map((c) => {
      const from = c.from === null ? 'not given' : JSON.stringify(c.from);
      const logged = c.run_logged === undefined || (c.from !== null && String(c.run_logged) === String(c.from)) ? '' : ` (run logged ${JSON.stringify(c.run_logged)})`;
      return `${c.key} ${from}${logged} → ${JSON.stringify(c.to)}`;
    })
    .join(', ');
}
const at = (step: number | null) => (step === null ? '' : ` @ step ${step}`);

/** The tree as people read it: each run indented under the checkpoint it forked from, with the diff at the branch. */
export function renderLineage(l: LineageJson): string {
  const lines: string[] = [];
  for (const r of l.runs) {
    const pad = '  '.repeat(r.depth);
    const where = [r.project, r.experiment].filter(Boolean).join('/');
    const job = r.job_id ? ` job ${r.job_id}#${r.attempt}` : '';
    const from = r.forked_from ? `forked from ${r.forked_from.checkpoint_id}${at(r.forked_from.step)}: ` : '';
    lines.push(`${pad}${from}run ${r.id} ${r.status}${job}${where ? ` (${where})` : ''}`);
    if (r.changes.length) lines.push(`${pad}  changes: ${changeLine(r.changes)}`);
    const ck = r.checkpoints.map((c) => `${c.id}${c.step === null ? '' : `@${c.step}`}${c.deleted_at ? ' (deleted)' : ''}`);
    lines.push(`${pad}  checkpoints: ${ck.length ? ck.join(' ') : 'none'}`);
  }
  return lines.join('\n');
}

export function registerForkCommands(program: Command): void {
  addPythonEnvOption(
    addCodeOptions(
      addConfigEditOptions(
        program
          .command('fork')
        .description("start a TRAIN job from a checkpoint: its attempt's config with these edits, resuming from it; prints the job id on the last line")
          .argument('<checkpoint>', 'checkpoint id')
          .argument('[command...]', 'a new command, after --'),
        'the new job',
      ),
      'the new job',
    ),
    'the new job',
  )
    .addOption(imageOptionFor('the new job'))
    .option('--workdir <dir>', "working directory on the node (default the checkpoint's job's; not with --code)")
    .option('--project <name>', "project (default the checkpoint's job's)")
    .option('--experiment <name>', "experiment (default the checkpoint's job's)")
    .option('--json', 'print the job as JSON')
    .action(async (checkpoint: string, command: string[], o, cmd: Command) => {
      refuseCodeWithWorkdir(o);
      const client = clientOf(cmd);
      const j = await forkCheckpoint(client, checkpoint, {
        ...(command.length ? { command } : {}),
        ...configEditsOf(o),
        ...pythonEnvOption(o),
        ...imageOption(o),
        // Uploaded first to the fork's project: the one given, else the checkpoint's run's.
        ...(await codeOption(client, o, async () => o.project ?? (await getRun(client, (await getCheckpoint(client, checkpoint)).run_id)).project)),
        working_dir: o.workdir ? (await import('node:path')).resolve(o.workdir) : undefined,
        project: o.project,
        experiment: o.experiment,
      });
      if (o.json) return out(JSON.stringify(j, null, 2));
      out(`forked ${j.forked_from.checkpoint_id}${at(j.forked_from.step)} of run ${j.forked_from.run_id}${j.changes.length ? ` (${changeLine(j.changes)})` : ' (same config)'}`);
      out(j.id);
    });

  program
    .command('lineage')
    .description('the tree of runs and their forks that holds a run or a checkpoint, with checkpoints and the config diff at each branch')
    .argument('<id>', 'a run id or a checkpoint id')
    .option('--json', 'JSON output')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      // A checkpoint's id says what it is (db/ids.ts: ckpt-…); a run's may come from an import.
      const l = await lineage(clientOf(cmd), id.startsWith('ckpt-') ? { checkpoint: id } : { run: id });
      out(o.json ? JSON.stringify(l, null, 2) : renderLineage(l));
    });
}
