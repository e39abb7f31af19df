import type { Command } from 'commander';

/** `gpuctl import-run PATH`. */
export function registerImportCommand(_program: Command): void {}
