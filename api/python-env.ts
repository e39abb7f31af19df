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

/** Where a run keeps the list of its Python environment's packages, among its artifacts. */
export const PYTHON_ENV_ARTIFACT = 'gpuplane/python-env.txt';

/**
 * The artifact of an `env.built` event's data (activities/gpu-host/python-env.ts): the
 * environment's hash and what it was built with, as comments, then `uv pip freeze`'s list; null
 * when the event names no package list.
 */
export function pythonEnvArtifact(data: Record<string, unknown> | undefined): string | null {
  const e = data?.python_env as Record<string, unknown> | undefined;
  if (!e || typeof e.packages !== 'string' || typeof e.sha256 !== 'string') return null;
  const said = (k: string) => (typeof e[k] === 'string' ? String(e[k]).replace(/[\r\n]/g, ' ') : '?');
  return `# python_env ${said('kind')} ${said('sha256')}, built by its node with ${said('uv')} for Python ${said('python')} (${said('platform')})\n${e.packages}`;
}
