#!/usr/bin/env node
// Entry point of a checkpoint's packer (checkpoint-packer.ts): TypeScript through tsx, as the
// scanner's. Its modules are all loaded before it takes the job's user.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./checkpoint-packer.ts');
await main(process.argv[2] ?? '{}');
