#!/usr/bin/env node
// Entry point of `gpuctl`: the build in .dist/ where it is that of the sources, else the
// TypeScript sources through tsx (runtime/dist.mjs).
import { loadEntry } from '../runtime/dist.mjs';

const { main } = await loadEntry('cli/main.ts');
await main(process.argv);
