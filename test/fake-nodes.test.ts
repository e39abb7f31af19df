import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Command, Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { guardTableName } from '../activities/gpu-host/port-guard.ts';
import { buildProgram } from '../cli/main.ts';
import { DEFAULT_FAKE_GPUS, localCards, localJobUsers, localNodeIds, MAX_FAKE_NODES } from '../cli/up-nodes.ts';
import { gpuctlPath } from './support/cluster.ts';

const exec = promisify(execFile);

/** `gpuctl up --fake-nodes N`: N fake nodes in the embedded plane (test/fake-nodes.e2e.test.ts runs them). */
describe('gpuctl up --fake-nodes', () => {
  const option = () =>
    (buildProgram() as Command).commands.find((c) => c.name() === 'up')!.options.find((o) => o.long === '--fake-nodes')! as Option & { parseArg: (v: string, prev: unknown) => number };

  it('takes an integer from 1 to 16, 1 by default; refuses 0, fractions, words and more than 16', () => {
    expect(option().defaultValue).toBe(1);
    expect(option().parseArg('1', 1)).toBe(1);
    expect(option().parseArg(String(MAX_FAKE_NODES), 1)).toBe(16);
    for (const bad of ['0', '-1', '1.5', '2e1', 'three', '', '17']) expect(() => option().parseArg(bad, 1), bad).toThrow(/^--fake-nodes must be an integer from 1 to 16$/);
  });

  it('refuses a bad count in one line, before anything starts', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-fake-nodes-'));
    const r = await exec(process.execPath, [gpuctlPath, 'up', '--fake-nodes', '0'], { env: { ...process.env, GPUPLANE_HOME: home } }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual(["gpuctl: option '--fake-nodes <n>' argument '0' is invalid. --fake-nodes must be an integer from 1 to 16"]);
    expect(fs.readdirSync(home)).toEqual([]);
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('names one node as today, and N > 1 nodes NODE-ID-1 … NODE-ID-N; refuses ids a node cannot have', () => {
    expect(localNodeIds('gpu-a')).toEqual(['gpu-a']);
    expect(localNodeIds('gpu-a', 1)).toEqual(['gpu-a']);
    expect(localNodeIds('gpu-a', 3)).toEqual(['gpu-a-1', 'gpu-a-2', 'gpu-a-3']);
    expect(localNodeIds('n', 16)).toHaveLength(16);
    expect(() => localNodeIds('n', 0)).toThrow(/from 1 to 16/);
    expect(() => localNodeIds('n', 17)).toThrow(/from 1 to 16/);
    // A 62-character id is a node id; with "-10" it would be 65 characters.
    const long = 'x'.repeat(62);
    expect(localNodeIds(long, 9)).toHaveLength(9);
    expect(() => localNodeIds(long, 10)).toThrow(`node id "${long}-10" (--node-id and --fake-nodes 10) must be 1-64 letters, digits, '.', '_' or '-': give a shorter --node-id`);
    expect(() => localNodeIds('a b')).toThrow(/node id "a b" must be .*\(--node-id\)/);
  });

  it('gives fake nodes fake cards: --fake-gpus, else 4 each, said in one line; one node keeps real cards where there are some', async () => {
    const real = (n: number) => async () => n;
    expect(await localCards(2, 3, real(8))).toEqual({ fakeGpus: 2 });
    expect(await localCards(0, 3, real(8))).toEqual({ fakeGpus: 0 });
    expect(await localCards(undefined, 3, real(8))).toEqual({ fakeGpus: DEFAULT_FAKE_GPUS, line: '--fake-nodes 3: each fake node has 4 fake cards (--fake-gpus N to choose)' });
    expect(await localCards(undefined, 1, real(8))).toEqual({});
    expect(await localCards(undefined, 1, real(0))).toEqual({ fakeGpus: 4, line: 'no nvidia-smi here: the local agent starts with 4 fake cards (--fake-gpus N to choose)' });
  });

  it('gives the agents of one machine one pool of job users: a project has one uid on all of them, two projects never share one', () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-fake-nodes-'));
    // Claims in a folder of the test's own, not the machine's /run/gpuplane/uids.
    const claims = path.join(home, 'claims');
    expect(localJobUsers('5000-5009', home, 1, true, claims)).toEqual({ pickFreeJobUids: true });
    const { sharedJobUsers } = localJobUsers('5000-5009', home, 3, true, claims);
    fs.mkdirSync(path.join(home, 'agent'));
    const a = sharedJobUsers!.forProject('a');
    const b = sharedJobUsers!.forProject('b');
    expect(a.uid).not.toBe(b.uid);
    expect(sharedJobUsers!.forProject('a')).toEqual(a);
    // Kept across restarts, for all the fake nodes at once.
    expect(JSON.parse(fs.readFileSync(path.join(home, 'agent', 'job-users.json'), 'utf8'))).toEqual({ a: a.uid, b: b.uid });
    // The one claim of these agents' process, taken back by the same data dir.
    expect(localJobUsers('5000-5009', home, 3, true, claims).sharedJobUsers!.forProject('b')).toEqual(b);
    // Not root: the agent's own user, for every node.
    expect(localJobUsers(undefined, home, 3, false)).toEqual({ sharedJobUsers: null });
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('gives each node its own nftables table, however long the ids, so one stopping never takes another\'s guard away', () => {
    const base = 'x'.repeat(60);
    const names = localNodeIds(base, 3).map(guardTableName);
    expect(new Set(names).size).toBe(3);
    for (const n of names) expect(n.length).toBeLessThanOrEqual(60);
    expect(guardTableName('gpu-01.lab-2')).toBe('gpuplane_gpu_01_lab_2');
  });
});
