import type { RetryPatch } from '../domain/attempt-config.ts';
import { normalizeCommand } from './command.ts';
import { imageOf, imageOrPythonEnv } from './container-image.ts';
import { pythonEnvOf } from './python-env.ts';
import type { RetryBody } from './schemas/jobs.ts';

/**
 * configPatchOf reads the config edit of a retry or a fork (RetryBody) as the patch
 * domain/attempt-config.ts applies: gpus and gpus_per_node are the same (cards on each node), so
 * both at once is refused (RETRY_GPUS_RULE, in the schema) rather than guessed at.
 */
export function configPatchOf(b: RetryBody): RetryPatch {
  imageOrPythonEnv(b.image, b.python_env);
  return {
    command: b.command === undefined ? undefined : normalizeCommand(b.command),
    workingDir: b.working_dir,
    gpus: b.gpus ?? b.gpus_per_node,
    nodes: b.nodes,
    memoryMb: b.memory_mb,
    selector: b.selector,
    priority: b.priority,
    env: b.env,
    params: b.params,
    pythonEnv: b.python_env === undefined ? undefined : b.python_env === null ? null : pythonEnvOf(b.python_env),
    image: b.image === undefined || b.image === null ? b.image : imageOf(b.image),
  };
}
