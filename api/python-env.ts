/** A job's Python environment from a request's body (domain/python-env.ts): checked, and named by its hash. */
import type { Static } from '@sinclair/typebox';
import { PYTHON_ENV_BODY_FIELDS, type PythonEnv } from '../domain/python-env.ts';
import { pythonEnvFrom } from '../runtime/python-env-files.ts';
import { DomainError } from './errors.ts';
import type { PythonEnvBodySchema } from './schemas/python-env.ts';

/** The PythonEnv a body's python_env names; more than one kind, half a uv project, or files the nodes would not build as given is a 400. */
export function pythonEnvOf(b: Static<typeof PythonEnvBodySchema>): PythonEnv {
  const given = PYTHON_ENV_BODY_FIELDS.filter((k) => b[k] !== undefined);
  const uv = b.pyproject !== undefined || b.uv_lock !== undefined;
  if (uv && (b.pyproject === undefined || b.uv_lock === undefined)) throw new DomainError('invalid', 'python_env: a uv project needs both pyproject and uv_lock');
  if (given.length > (uv ? 2 : 1)) throw new DomainError('invalid', `python_env: give one of requirements, pylock, or pyproject with uv_lock (got ${given.join(', ')})`);
  try {
    if (b.requirements !== undefined) return pythonEnvFrom('requirements', b.requirements);
    if (b.pylock !== undefined) return pythonEnvFrom('pylock', b.pylock);
    return pythonEnvFrom('uv-lock', b.uv_lock!, b.pyproject!);
  } catch (err) {
    throw new DomainError('invalid', `python_env: ${(err as Error).message}`);
  }
}

/** A job's Python environment as the API shows it: its kind, hash and size, not its text. */
export function pythonEnvJson(e: PythonEnv | null | undefined) {
  return e ? { kind: e.kind, sha256: e.sha256, bytes: Buffer.byteLength(e.text, 'utf8') + Buffer.byteLength(e.pyproject ?? '', 'utf8') } : null;
}
