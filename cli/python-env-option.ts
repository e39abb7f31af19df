/** `--python-env FILE` of submit, retry and fork (docs/environments.md): the file's text, as the API's python_env. */
import fs from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { requirementsProblem } from '../domain/python-env.ts';

/** Adds --python-env to a command; `what` names the job or attempt that runs in it. */
export function addPythonEnvOption(c: Command, what: string): Command {
  return c.option('--python-env <file>', `a requirements.txt: ${what} runs in a Python environment its node builds from it with uv (docs/environments.md)`);
}

/** Files that name an environment another way: not built yet, said in one line rather than sent as requirements. */
const NOT_YET: Record<string, string> = {
  'pyproject.toml': 'pyproject.toml with uv.lock',
  'uv.lock': 'pyproject.toml with uv.lock',
  'pylock.toml': 'pylock.toml',
};

/** The python_env of a request for --python-env: none without it; a file that is missing, of a kind not built yet, or one the nodes would refuse, is one line before anything is sent. */
export function pythonEnvOption(o: { pythonEnv?: string }): { python_env?: { requirements: string } } {
  if (!o.pythonEnv) return {};
  const base = path.basename(o.pythonEnv);
  const later = NOT_YET[base] ?? (/^pylock\..+\.toml$/.test(base) ? 'pylock.toml' : undefined);
  if (later) throw new InvalidArgumentError(`--python-env ${o.pythonEnv}: ${later} is not built yet; give a requirements.txt (uv export or uv pip compile makes one)`);
  let text: string;
  try {
    text = fs.readFileSync(o.pythonEnv, 'utf8');
  } catch (err) {
    throw new InvalidArgumentError(`--python-env ${o.pythonEnv}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  const problem = requirementsProblem(text);
  if (problem) throw new InvalidArgumentError(`--python-env ${o.pythonEnv} ${problem}`);
  return { python_env: { requirements: text } };
}
