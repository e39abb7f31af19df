import { describe, expect, it } from 'vitest';
import { advertiseAddrProblem, localAddressToward } from '../runtime/advertise-addr.ts';
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

describe('the address a node advertises', () => {
  it('defaults to the local address the route to the control plane leaves by', async () => {
    expect(await localAddressToward('127.0.0.1:7233')).toBe('127.0.0.1');
    expect(await localAddressToward('[::1]:7233')).toBe('::1');
    await expect(localAddressToward('no-port')).rejects.toThrow('not host:port');
  });

  it('takes an IP or a host name, and refuses anything else in one line', () => {
    for (const ok of ['10.0.0.7', 'fe80::1', 'gpu-01', 'gpu-01.lab.example']) expect(advertiseAddrProblem(ok), ok).toBeNull();
    for (const bad of ['', 'a b', 'http://x', 'x:80', '-x', 'x..y']) expect(advertiseAddrProblem(bad), bad).toMatch(/^--advertise-addr must be an IP address or a host name/);
  });
});
