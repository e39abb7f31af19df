#!/usr/bin/env node
// Entry point of a checkpoint's packer (checkpoint-packer.ts): built or through tsx, as gpuctl
// (runtime/dist.mjs), as the scanner's. Its modules are all loaded before it takes the job's user.
import { loadEntry } from '../../runtime/dist.mjs';

const { main } = await loadEntry('activities/gpu-host/checkpoint-packer.ts');
await main(process.argv[2] ?? '{}');
