#!/usr/bin/env node
// Entry point of an attempt's checkpoint scanner (checkpoint-scanner.ts): TypeScript through tsx,
// resolved from this package, as cli/gpuctl.mjs does. Its modules are all loaded before it
// takes the job's user, so that user never needs to read the agent's code.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./checkpoint-scanner.ts');
await main(process.argv[2] ?? '{}');
