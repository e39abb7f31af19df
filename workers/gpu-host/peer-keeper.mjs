#!/usr/bin/env node
// Entry point of a node's peer keeper (peer-keeper.ts): TypeScript through tsx, as the packer's.
import { register } from 'tsx/esm/api';

register();
const { runPeerKeeper } = await import('./peer-keeper.ts');
await runPeerKeeper(process.argv[2] ?? '');
