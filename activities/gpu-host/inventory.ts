import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { GpuCard } from '../../domain/node.ts';

const run = promisify(execFile);

/** Parses `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader`. */
export function parseNvidiaSmi(csv: string): GpuCard[] {
  return csv
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((line) => {
      const [index, uuid, name, mem] = line.split(',').map((s) => s.trim());
      const memoryMb = Number.parseInt(mem ?? '', 10);
      if (!Number.isInteger(Number(index)) || !uuid) throw new Error(`cannot read nvidia-smi line: ${line}`);
      return { index: Number(index), uuid, name: name ?? 'GPU', memoryMb: Number.isFinite(memoryMb) ? memoryMb : 0 };
    });
}

export function fakeGpus(nodeId: string, n: number): GpuCard[] {
  return Array.from({ length: n }, (_, i) => ({
    index: i,
    uuid: `GPU-fake-${nodeId}-${i}`,
    name: 'Fake GPU',
    memoryMb: 81920,
  }));
}

/**
 * The node's cards: `fakeCount` fake ones when given, else what nvidia-smi reports,
 * else none (a CPU-only node still runs zero-GPU jobs).
 */
export async function readInventory(nodeId: string, fakeCount?: number): Promise<{ gpus: GpuCard[]; source: string }> {
  if (fakeCount !== undefined) return { gpus: fakeGpus(nodeId, fakeCount), source: 'fake' };
  try {
    const { stdout } = await run('nvidia-smi', ['--query-gpu=index,uuid,name,memory.total', '--format=csv,noheader,nounits']);
    return { gpus: parseNvidiaSmi(stdout), source: 'nvidia-smi' };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { gpus: [], source: 'none (no nvidia-smi; use --fake-gpus N)' };
    throw err;
  }
}
