#!/usr/bin/env node
// Entry point of `gpuctl`: TypeScript sources run through tsx, resolved from this package.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./main.ts');
await main(process.argv);
