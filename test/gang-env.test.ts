import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gangEnv, hostfileText, MASTER_PORTS, masterPortFor } from '../domain/gang-env.ts';

const gang = { members: [{ address: '10.0.0.1', gpus: 8 }, { address: 'gpu-02.lab', gpus: 8 }], masterPort: 29517 };

describe('what the members of a gang are told', () => {
  it("gives torchrun its PET_* options, the plain forms and the hostfile's path; never WORLD_SIZE or RANK", () => {
    expect(gangEnv(gang, 1, '/data/hostfile')).toEqual({
      PET_NNODES: '2',
      PET_NODE_RANK: '1',
      PET_NPROC_PER_NODE: '8',
      PET_MASTER_ADDR: '10.0.0.1',
      PET_MASTER_PORT: '29517',
      MASTER_ADDR: '10.0.0.1',
      MASTER_PORT: '29517',
      NNODES: '2',
      NODE_RANK: '1',
      GPUPLANE_NNODES: '2',
      GPUPLANE_NODE_RANK: '1',
      GPUPLANE_HOSTFILE: '/data/hostfile',
    });
    expect(gangEnv(gang, 0, '/h')).toMatchObject({ NODE_RANK: '0', MASTER_ADDR: '10.0.0.1' });
    expect(Object.keys(gangEnv(gang, 0, '/h'))).not.toContain('WORLD_SIZE');
    expect(() => gangEnv(gang, 2, '/h')).toThrow('rank 2 is not a member of a gang of 2');
  });

  it('a CPU-only member runs one process; the hostfile has a line per member in rank order', () => {
    expect(gangEnv({ members: [{ address: 'a', gpus: 0 }, { address: 'b', gpus: 0 }], masterPort: 29500 }, 0, '/h').PET_NPROC_PER_NODE).toBe('1');
    expect(hostfileText(gang.members)).toBe('10.0.0.1 slots=8\ngpu-02.lab slots=8\n');
  });
});

describe('the rendezvous port', () => {
  it('is in torchrun\'s range, the same for the same attempt, elsewhere for the next, and never one taken', () => {
    const p = masterPortFor('job-abc', 1, new Set())!;
    expect(p).toBeGreaterThanOrEqual(MASTER_PORTS.first);
    expect(p).toBeLessThanOrEqual(MASTER_PORTS.last);
    expect(masterPortFor('job-abc', 1, new Set())).toBe(p);
    expect(masterPortFor('job-abc', 2, new Set())).not.toBe(p);
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 1000 }), fc.uniqueArray(fc.integer({ min: MASTER_PORTS.first, max: MASTER_PORTS.last }), { maxLength: 499 }), (job, attempt, taken) => {
        const port = masterPortFor(job, attempt, new Set(taken));
        return port !== null && !taken.includes(port) && port >= MASTER_PORTS.first && port <= MASTER_PORTS.last;
      }),
    );
  });

  it('is none when every port of the range is taken', () => {
    const all = new Set(Array.from({ length: MASTER_PORTS.last - MASTER_PORTS.first + 1 }, (_, i) => MASTER_PORTS.first + i));
    expect(masterPortFor('job-x', 1, all)).toBeNull();
  });
});
