#!/usr/bin/env node
// Entry point of an attempt's checkpoint scanner (checkpoint-scanner.ts): built or through tsx,
// as gpuctl (runtime/dist.mjs). Its modules are all loaded before it takes the job's user, so that
// user never needs to read the agent's code.
import { loadEntry } from '../../runtime/dist.mjs';

const { main } = await loadEntry('activities/gpu-host/checkpoint-scanner.ts');
await main(process.argv[2] ?? '{}');
