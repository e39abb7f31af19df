/**
 * Reading a sweep file's fields (sweep-spec.ts validateSweepSpec): each reader returns the
 * field's value or throws a SweepSpecError naming the field and what is wrong with it.
 */
import { imageRefProblem } from './container-image.ts';

/** What is wrong with a sweep file, and where: `field` is a dotted path into the file. */
export class SweepSpecError extends Error {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(field ? `${field}: ${problem}` : problem);
    this.name = 'SweepSpecError';
  }
}

export function command(value: unknown, at: string, required: boolean): string | string[] | undefined {
  if (value === undefined) return required ? fail(at, 'required') : undefined;
  if (typeof value === 'string') {
    if (!value.trim()) fail(at, 'must not be blank');
    return value;
  }
  if (!Array.isArray(value) || value.length === 0) fail(at, 'must be a string or a non-empty list of strings');
  value.forEach((v: unknown, i) => {
    if (typeof v !== 'string' || v === '') fail(`${at}[${i}]`, 'must be a non-empty string');
  });
  if (!(value as string[]).some((v) => v.trim())) fail(at, 'must not be blank');
  return value as string[];
}

export function object(value: unknown, at: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(at, 'must be a mapping (an object)');
  return value as Record<string, unknown>;
}

/** An OCI image reference (domain/container-image.ts), said in the sweep file's words. */
export function image(value: unknown): string {
  const ref = text(value, 'image');
  const problem = imageRefProblem(ref);
  return problem ? fail('image', problem.replace(/^image:? /, '')) : ref;
}

export function text(value: unknown, at: string): string {
  if (typeof value !== 'string' || !value.trim()) fail(at, 'must be a non-empty string');
  return value as string;
}

export function num(value: unknown, at: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) fail(at, 'must be a finite number');
  return value as number;
}

export function int(value: unknown, at: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) fail(at, 'must be an integer');
  const n = value as number;
  if (n < min || n > max) fail(at, max === Number.MAX_SAFE_INTEGER ? `must be at least ${min}` : `must be from ${min} to ${max}`);
  return n;
}

export function oneOf<T extends string>(value: unknown, at: string, options: readonly T[], required: boolean): T | undefined {
  if (value === undefined && !required) return undefined;
  if (value === undefined) fail(at, `required: ${options.join(' | ')}`);
  if (!options.includes(value as T)) fail(at, `must be one of ${options.join(' | ')}, not ${JSON.stringify(value)}`);
  return value as T;
}

export function fail(field: string, problem: string): never {
  throw new SweepSpecError(field, problem);
}
