import type { RetryPatch } from '../domain/attempt-config.ts';
import { normalizeCommand } from './command.ts';
import { DomainError } from './errors.ts';
import type { RetryBody } from './schemas/jobs.ts';

/**
 * configPatchOf reads the config edit of a retry or a fork (RetryBody) as the patch
 * domain/attempt-config.ts applies: gpus and gpus_per_node are the same (cards on each node), so
 * both at once is refused rather than guessed at.
 */
export function configPatchOf(b: RetryBody): RetryPatch {
  if (b.gpus !== undefined && b.gpus_per_node !== undefined) throw new DomainError('invalid', 'give gpus or gpus_per_node (the same: cards on each node), not both');
  return {
    command: b.command === undefined ? undefined : normalizeCommand(b.command),
    workingDir: b.working_dir,
    gpus: b.gpus ?? b.gpus_per_node,
    nodes: b.nodes,
    selector: b.selector,
    priority: b.priority,
    env: b.env,
    params: b.params,
  };
}
