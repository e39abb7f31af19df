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
