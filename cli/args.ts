/** Parsers of option values shared by the commands: each refuses a bad value with one clear line. */
import { InvalidArgumentError } from 'commander';
import { passEnvRefusal } from '../domain/job-env.ts';
import { cacheSizeRefusal, parseEnvCacheSize } from '../domain/env-cache.ts';
import { MAX_MEMORY_MB, parseMemoryMb } from '../domain/memory-limit.ts';
import { advertiseAddrProblem } from '../runtime/advertise-addr.ts';

export function intArg(name: string, min: number, max?: number) {
  return (v: string) => {
    const n = Number(v);
    if (!/^-?\d+$/.test(v) || n < min || (max !== undefined && n > max)) throw new InvalidArgumentError(max === undefined ? `${name} must be an integer >= ${min}` : `${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}
/** A span of time in seconds: `90`, `90s`, `30m`, `2h`, `1d`; 0 or `off` is 0. */
export function durationArg(name: string, maxS: number) {
  return (v: string) => {
    if (v === 'off') return 0;
    const m = /^(\d+)(s|m|h|d)?$/.exec(v);
    const n = m ? Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'] : NaN;
    if (!(n >= 0 && n <= maxS)) throw new InvalidArgumentError(`${name} must be a duration like 90s, 30m or 2h (at most ${maxS / 86_400} days), or off`);
    return n;
  };
}

/**
 * A memory limit (`--memory`) in MiB: `512` (MiB), `512M`, `8G`, `1.5G`, `1T`, within
 * domain/memory-limit.ts's bounds. With `none`: `none` is null (a retry's "no limit any more").
 */
export function memoryArg(name: string, none = false) {
  return (v: string): number | null => {
    if (none && v === 'none') return null;
    const mb = parseMemoryMb(v);
    if (mb === null) throw new InvalidArgumentError(`${name} must be a whole number of MiB (512) or a size with a unit (512M, 8G, 1.5G), from 1 MiB to ${MAX_MEMORY_MB / 1024 / 1024} TiB${none ? ', or none' : ''}`);
    return mb;
  };
}

/** A cache bound in bytes (`--env-cache-size`): `50G`, `500M`, `4096B`, or a bare number of GiB (domain/env-cache.ts). */
export function envCacheSizeArg(name: string) {
  return (v: string): number => {
    const bytes = parseEnvCacheSize(v);
    if (bytes === null) throw new InvalidArgumentError(cacheSizeRefusal(name, v));
    return bytes;
  };
}

/** How a `--param`/`--set` value is read, said once for the help text and docs/cli.md. */
export const PARAM_VALUE_RULE = 'numbers (3, -0.5, 3e-4), true, false and null are typed; {…}, […] and "…" are read as JSON; anything else is a string';

const NUMBER = /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * paramValue reads one param value by the one rule of PARAM_VALUE_RULE, the same for submit's
 * `--param` and retry's `--set`: `lr=3e-4` is the number 0.0003 either way. A value that only
 * looks like JSON (`{oops`) stays the string it is, as does a number too large to be finite.
 */
export function paramValue(raw: string): unknown {
  if (NUMBER.test(raw)) {
    const n = Number(raw);
    return Number.isFinite(n) ? n : raw;
  }
  if (raw === 'true' || raw === 'false') return raw === 'true';
  if (raw === 'null') return null;
  if (/^[[{"]/.test(raw)) {
    try {
      return JSON.parse(raw);
    } catch {
      // A plain string.
    }
  }
  return raw;
}

/** `--param lr=3e-4` / `--set lr=3e-4` → {lr: 0.0003}, by paramValue's rule; repeatable. */
export function setArg(v: string, prev: Record<string, unknown> = {}) {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${v}"`);
  return { ...prev, [v.slice(0, i)]: paramValue(v.slice(i + 1)) };
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

/** `--advertise-addr`: an IP address or a host name other nodes can connect to. */
export function advertiseAddrArg(v: string): string {
  const problem = advertiseAddrProblem(v);
  if (problem) throw new InvalidArgumentError(problem.replace(/^--advertise-addr /, ''));
  return v;
}
