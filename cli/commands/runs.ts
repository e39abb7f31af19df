import type { Command } from 'commander';

/** `gpuctl runs`, `gpuctl run ID`, `gpuctl metrics RUN`. */
export function registerRunCommands(_program: Command): void {}
