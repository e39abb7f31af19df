/**
 * A job's Python environment files (domain/python-env.ts) as gpuctl, the API and the agent check
 * them: the same rules everywhere, so a file the nodes would refuse is refused at the door in one
 * line, and a node refuses it again whatever an attempt's spec says. TOML is read with smol-toml.
 */
import { createHash } from 'node:crypto';
import { parse, stringify, TomlError } from 'smol-toml';
import {
  MAX_PYTHON_ENV_BYTES,
  PYTHON_ENV_FILES,
  pylockRequirements,
  pythonEnvDigestText,
  requirementsProblem,
  uvProjectProblem,
  type PythonEnv,
  type PythonEnvKind,
  type TomlTable,
} from '../domain/python-env.ts';

/** A TOML file's tables, or why not in one line (`file` names it). */
function tomlOf(text: string, file: string): TomlTable | string {
  try {
    return parse(text) as TomlTable;
  } catch (err) {
    const e = err as TomlError;
    return `${file} is not valid TOML${e.line ? ` (line ${e.line}, column ${e.column})` : ''}: ${String(e.message).split('\n')[0]}`;
  }
}

/** The files of an environment, before its hash: what a request gives. */
export type PythonEnvFiles = Pick<PythonEnv, 'kind' | 'text' | 'pyproject'>;

/** Why these files cannot be a job's environment, in one line that names the file, or null. */
export function pythonEnvProblem(e: PythonEnvFiles): string | null {
  const files = PYTHON_ENV_FILES[e.kind];
  const bytes = Buffer.byteLength(e.text, 'utf8') + Buffer.byteLength(e.pyproject ?? '', 'utf8');
  if (bytes > MAX_PYTHON_ENV_BYTES) return `${files} is larger than ${MAX_PYTHON_ENV_BYTES / 1024} KiB`;
  if (e.text.includes('\0') || e.pyproject?.includes('\0')) return `${files} has a NUL byte (not a text file)`;
  if (e.kind === 'requirements') {
    const p = requirementsProblem(e.text);
    return p && `requirements.txt ${p}`;
  }
  if (e.kind === 'pylock') {
    const r = pylockRequirementsOf(e.text);
    return 'problem' in r ? r.problem : null;
  }
  if (e.pyproject === undefined) return 'a uv project needs its pyproject.toml beside its uv.lock';
  const pyproject = tomlOf(e.pyproject, 'pyproject.toml');
  if (typeof pyproject === 'string') return pyproject;
  const lock = tomlOf(e.text, 'uv.lock');
  if (typeof lock === 'string') return lock;
  return uvProjectProblem(pyproject, lock);
}

/** A pylock.toml's text as the requirements the node installs (domain/python-env.ts pylockRequirements), or why not. */
export function pylockRequirementsOf(text: string): { text: string } | { problem: string } {
  const doc = tomlOf(text, 'pylock.toml');
  if (typeof doc === 'string') return { problem: doc };
  const r = pylockRequirements(doc);
  if ('problem' in r) return { problem: `pylock.toml ${r.problem}` };
  const p = requirementsProblem(r.text);
  return p ? { problem: `pylock.toml ${p}` } : r;
}

/** The environment these files make, with its hash; throws (one line) where pythonEnvProblem says no. */
export function pythonEnvFrom(kind: PythonEnvKind, text: string, pyproject?: string): PythonEnv {
  const files: PythonEnvFiles = { kind, text, ...(kind === 'uv-lock' ? { pyproject: pyproject ?? '' } : {}) };
  const problem = pythonEnvProblem(files);
  if (problem) throw new Error(problem);
  return { ...files, sha256: createHash('sha256').update(pythonEnvDigestText(files), 'utf8').digest('hex') };
}

/**
 * A uv project's pyproject.toml as the node exports its lock from: a workspace root of its own
 * (`[tool.uv.workspace]`, no members, where it names none), so that uv looks in no folder above
 * it for a workspace, where anyone who can write there (/var/tmp, or a build's own packages)
 * could put a pyproject.toml whose lock would be taken in place of the job's. Parsed and written
 * again with smol-toml only where it has no workspace table; as given otherwise.
 */
export function standaloneProject(pyproject: string): string {
  const doc = parse(pyproject) as TomlTable;
  const tool = (doc.tool ??= {}) as TomlTable;
  const uv = (tool.uv ??= {}) as TomlTable;
  if (uv.workspace !== undefined) return pyproject;
  uv.workspace = { members: [] };
  return `${stringify(doc)}\n`;
}
