import type { FastifyInstance } from 'fastify';
import { DomainError } from './errors.ts';
import { imageRefProblem } from '../domain/container-image.ts';

/** The image a body names, checked as an OCI reference: a bad one is a 400 in one line (domain/container-image.ts). */
export function imageOf(ref: string): string {
  const problem = imageRefProblem(ref);
  if (problem) throw new DomainError('invalid', problem);
  return ref;
}

/** A job runs in an image or in a Python environment its node builds, not both: the node's venv is not the image's Python. */
export function imageOrPythonEnv(image: string | null | undefined, pythonEnv: unknown): void {
  if (image && pythonEnv) throw new DomainError('invalid', 'image: give an image or a python_env, not both (an image brings its own Python; install the packages into it)');
}

/**
 * A body's `image` (POST /jobs, a retry, a fork) is checked in words before the schema's pattern
 * (the same grammar, IMAGE_REF_PATTERN, which the document states): a bad reference is this one
 * line, not the pattern's regular expression.
 */
export function installImageCheck(app: FastifyInstance): void {
  app.addHook('preValidation', async (req) => {
    const b = req.body as Record<string, unknown> | undefined;
    if (req.url.startsWith('/api/v1/') && b && typeof b === 'object' && !Array.isArray(b) && typeof b.image === 'string') imageOf(b.image);
  });
}
