/** `--python-env FILE` of submit, retry and fork (docs/environments.md): the file's text (a uv project's two files), as the API's python_env. */
import fs from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { pythonEnvProblem } from '../runtime/python-env-files.ts';

/** Adds --python-env to a command; `what` names the job or attempt that runs in it. */
export function addPythonEnvOption(c: Command, what: string): Command {
  return c.option(
    '--python-env <file>',
    `a requirements.txt, a pylock.toml, or a uv project's pyproject.toml or uv.lock (the other beside it): ${what} runs in a Python environment its node builds from it with uv; with --code, a path relative to that folder is looked for there first (docs/environments.md)`,
  );
}

/** The API's python_env for one file, by its name. */
export type PythonEnvBody = { requirements: string } | { pylock: string } | { pyproject: string; uv_lock: string };

const isPylock = (base: string) => base === 'pylock.toml' || /^pylock\.[^/]+\.toml$/.test(base);

/** The file named: relative to the code's folder where it is there, else to `base`. */
function located(file: string, codeDir: string | undefined, base: string): string {
  if (codeDir && !path.isAbsolute(file)) {
    const inCode = path.resolve(codeDir, file);
    if (fs.existsSync(inCode)) return inCode;
  }
  return path.resolve(base, file);
}

/** A file's text; a missing one is one line (`missing`, where it is the other file of a uv project). */
function read(file: string, shown: string, missing = 'no such file'): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${shown}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? missing : (err as Error).message}`);
  }
}

/**
 * The API's python_env for the file `shown` (relative to `codeDir` where it is there, else to
 * `base`). A uv project is named by either of its files, the other read from beside it. A file
 * that is missing, or that the nodes would refuse, throws one line that starts with `shown`.
 */
export function pythonEnvBodyOf(shown: string, codeDir?: string, base = process.cwd()): PythonEnvBody {
  const file = located(shown, codeDir, base);
  const name = path.basename(file);
  let body: PythonEnvBody;
  let problem: string | null;
  if (name === 'pyproject.toml' || name === 'uv.lock') {
    const dir = path.dirname(file);
    const pyproject = read(path.join(dir, 'pyproject.toml'), shown, name === 'pyproject.toml' ? undefined : 'no pyproject.toml beside it (a uv project needs both files)');
    const lock = read(path.join(dir, 'uv.lock'), shown, name === 'uv.lock' ? undefined : 'no uv.lock beside it (`uv lock` makes one)');
    body = { pyproject, uv_lock: lock };
    problem = pythonEnvProblem({ kind: 'uv-lock', text: lock, pyproject });
  } else if (isPylock(name)) {
    const text = read(file, shown);
    body = { pylock: text };
    problem = pythonEnvProblem({ kind: 'pylock', text });
  } else {
    const text = read(file, shown);
    body = { requirements: text };
    problem = pythonEnvProblem({ kind: 'requirements', text });
  }
  if (problem) throw new Error(`${shown}: ${problem}`);
  return body;
}

/** The python_env of a request for --python-env (pythonEnvBodyOf): none without it; a problem is one line before anything is sent. */
export function pythonEnvOption(o: { pythonEnv?: string; code?: string }): { python_env?: PythonEnvBody } {
  if (!o.pythonEnv) return {};
  try {
    return { python_env: pythonEnvBodyOf(o.pythonEnv, o.code) };
  } catch (err) {
    throw new InvalidArgumentError(`--python-env ${(err as Error).message}`);
  }
}
