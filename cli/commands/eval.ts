import type { Command } from 'commander';

/** `gpuctl eval CKPT [-- CMD...]`. */
export function registerEvalCommand(_program: Command): void {}
