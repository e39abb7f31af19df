import { spawn } from 'node:child_process';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gangEnv, hostfileText, MASTER_PORTS, masterPortFor } from '../domain/gang-env.ts';
import { freePort } from './support/ports.ts';

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

describe('examples/gang_rendezvous.py with what gangEnv tells its members', () => {
  const run = (env: Record<string, string>, timeoutS = 20) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const p = spawn('python3', [path.join(import.meta.dirname, '../examples/gang_rendezvous.py'), '--timeout', String(timeoutS)], { env: { PATH: process.env.PATH ?? '', ...env } });
      let out = '';
      let err = '';
      p.stdout.on('data', (d: Buffer) => (out += d));
      p.stderr.on('data', (d: Buffer) => (err += d));
      p.once('exit', (code) => resolve({ code, out, err }));
    });

  it('three members meet at rank 0 and each knows its rank, the node count and its cards', async () => {
    const g = { members: [0, 1, 2].map(() => ({ address: '127.0.0.1', gpus: 2 })), masterPort: await freePort() };
    const rs = await Promise.all([2, 0, 1].map((rank) => run({ ...gangEnv(g, rank, '/nonexistent/hostfile'), CUDA_VISIBLE_DEVICES: `${rank * 2},${rank * 2 + 1}` })));
    for (const r of rs) expect(r.code, r.err).toBe(0);
    const lines = rs.map((r) => JSON.parse(r.out) as { rank: number; nnodes: number; cards: string; peers: number[] }).sort((a, b) => a.rank - b.rank);
    expect(lines).toEqual([0, 1, 2].map((rank) => ({ rank, nnodes: 3, cards: `${rank * 2},${rank * 2 + 1}`, peers: [0, 1, 2] })));
  });

  it('a member alone times out with exit 2', async () => {
    const g = { members: [{ address: '127.0.0.1', gpus: 1 }, { address: '127.0.0.1', gpus: 1 }], masterPort: await freePort() };
    const r = await run(gangEnv(g, 1, '/h'), 1);
    expect(r.code).toBe(2);
    expect(r.err).toContain('rendezvous timed out');
  });
});
