import type { Command } from 'commander';

/** `gpuctl checkpoints`, `gpuctl checkpoint ID`, `gpuctl best`. */
export function registerCheckpointCommands(_program: Command): void {}
