import { DomainError } from './errors.ts';

/** argv as given, or one string run by /bin/sh -c; a blank command is refused. */
export function normalizeCommand(command: string | string[]): string[] {
  const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : command;
  if (argv.every((c) => c.trim() === '')) throw new DomainError('invalid', 'command must not be empty');
  return argv;
}
