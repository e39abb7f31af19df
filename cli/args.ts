/** Parsers of option values shared by the commands: each refuses a bad value with one clear line. */
import { InvalidArgumentError } from 'commander';
import { passEnvRefusal } from '../domain/job-env.ts';

export function intArg(name: string, min: number) {
  return (v: string) => {
    if (!/^-?\d+$/.test(v) || Number(v) < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    return Number(v);
  };
}
/** `--set lr=0.01` → {lr: 0.01}: JSON values where they parse (numbers, true, null, "x"), else strings. */
export function setArg(v: string, prev: Record<string, unknown> = {}) {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${v}"`);
  const raw = v.slice(i + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // A plain string.
  }
  return { ...prev, [v.slice(0, i)]: value };
}
export function pairArg(v: string, prev: Record<string, string> = {}) {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${v}"`);
  return { ...prev, [v.slice(0, i)]: v.slice(i + 1) };
}

/** `--pass-env NAME`, repeatable; a name that looks like a secret is refused, not silently dropped. */
export function envNameArg(v: string, prev: string[] = []) {
  const refused = passEnvRefusal(v);
  if (refused) throw new InvalidArgumentError(refused);
  return [...prev, v];
}

/** `--allowed-root DIR`, repeatable; GPUPLANE_ALLOWED_ROOTS holds several, ':'-separated, as PATH does. */
export function rootsArg(v: string, prev: string[] = []) {
  return [...prev, ...v.split(':').filter(Boolean)];
}

/** A repeatable option whose variable form is comma-separated (`--protect`, GPUPLANE_PROTECT). */
export function listArg(v: string, prev: string[] = []) {
  return [...prev, ...v.split(',').map((s) => s.trim()).filter(Boolean)];
}

/**
 * `--secret-env NAME`: the value comes from gpuctl's environment, never from the command line,
 * where `ps` and the shell's history would keep it.
 */
export function secretArg(v: string, prev: Record<string, string> = {}) {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(v)) throw new InvalidArgumentError(`expected a variable name (its value is read from this environment), got "${v.split('=')[0]}..."`);
  const value = process.env[v];
  if (value === undefined) throw new InvalidArgumentError(`${v} is not set in this environment: export it first (its value is sent, not the name)`);
  return { ...prev, [v]: value };
}

/** `--eval-when each | every:N | final`. */
export function evalWhenArg(v: string): { when: 'each' | 'every' | 'final'; n?: number } {
  if (v === 'each' || v === 'final') return { when: v };
  const m = /^every:([1-9]\d{0,5})$/.exec(v);
  if (m) return { when: 'every', n: Number(m[1]) };
  throw new InvalidArgumentError('expected each, final or every:N');
}
