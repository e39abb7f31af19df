#!/usr/bin/env node
// Entry point of a node's peer keeper (peer-keeper.ts): built or through tsx, as gpuctl (runtime/dist.mjs).
import { loadEntry } from '../../runtime/dist.mjs';

const { runPeerKeeper } = await loadEntry('workers/gpu-host/peer-keeper.ts');
await runPeerKeeper(process.argv[2] ?? '');
