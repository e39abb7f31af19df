/** A job's Python environment from a request's body (domain/python-env.ts): checked, and named by its hash. */
import { createHash } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import { requirementsProblem, type PythonEnv } from '../domain/python-env.ts';
import { DomainError } from './errors.ts';
import type { PythonEnvBodySchema } from './schemas/python-env.ts';

/** The PythonEnv a body's python_env names; a file the nodes would not build as given is a 400. */
export function pythonEnvOf(b: Static<typeof PythonEnvBodySchema>): PythonEnv {
  const problem = requirementsProblem(b.requirements);
  if (problem) throw new DomainError('invalid', `python_env.requirements ${problem}`);
  return { kind: 'requirements', text: b.requirements, sha256: createHash('sha256').update(b.requirements, 'utf8').digest('hex') };
}

/** A job's Python environment as the API shows it: its kind, hash and size, not its text. */
export function pythonEnvJson(e: PythonEnv | null | undefined) {
  return e ? { kind: e.kind, sha256: e.sha256, bytes: Buffer.byteLength(e.text, 'utf8') } : null;
}
