import type { Command } from 'commander';

/** `gpuctl logs [-f] ID`. */
export function registerLogCommands(_program: Command): void {}
