import { execFileSync } from 'node:child_process';
import path from 'node:path';

let cached: string | undefined;

/** The Python of the examples' venv (numpy; scripts/examples-venv.sh, cached outside the checkout). */
export function examplesPython(): string {
  cached ??= path.join(execFileSync('bash', [path.resolve('scripts/examples-venv.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim(), 'bin', 'python');
  return cached;
}
