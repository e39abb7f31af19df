import { describe, expect, it } from 'vitest';
import { fakeGpus, parseNvidiaSmi } from '../activities/gpu-host/inventory.ts';

describe('GPU inventory', () => {
  it('reads nvidia-smi CSV', () => {
    const csv = '0, GPU-8f2c6e52-aaaa, NVIDIA H100 80GB HBM3, 81559\n1, GPU-1234, NVIDIA H100 80GB HBM3, 81559\n';
    expect(parseNvidiaSmi(csv)).toEqual([
      { index: 0, uuid: 'GPU-8f2c6e52-aaaa', name: 'NVIDIA H100 80GB HBM3', memoryMb: 81559 },
      { index: 1, uuid: 'GPU-1234', name: 'NVIDIA H100 80GB HBM3', memoryMb: 81559 },
    ]);
  });
  it('rejects a line it cannot read', () => {
    expect(() => parseNvidiaSmi('garbage')).toThrow(/cannot read/);
  });
  it('makes N fake cards with stable ids', () => {
    expect(fakeGpus('n1', 2).map((g) => g.uuid)).toEqual(['GPU-fake-n1-0', 'GPU-fake-n1-1']);
  });
});
