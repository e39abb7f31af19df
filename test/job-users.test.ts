import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_JOB_UIDS, JobUsers, parseJobUsers } from '../activities/gpu-host/job-users.ts';
import { envBlock } from '../activities/gpu-host/shim.ts';
import { guardRuleset, guardTableName, listeningPorts, parseEndpoint } from '../activities/gpu-host/port-guard.ts';
import { readNodeTokenFile } from '../runtime/credentials.ts';
import { newToken } from '../runtime/tokens.ts';
import net from 'node:net';

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-job-users-'));

describe('--job-users', () => {
  it('takes agent, a uid range or user names, and refuses the rest in one line', () => {
    expect(parseJobUsers('agent')).toEqual({ kind: 'agent' });
    const pool = parseJobUsers('5000-5002');
    expect(pool.kind === 'pool' && pool.users.map((u) => u.uid)).toEqual([5000, 5001, 5002]);
    const lookup = (n: string) => (n === 'alice' ? { uid: 1001, gid: 1001, name: 'alice' } : n === 'root' ? { uid: 0, gid: 0, name: 'root' } : null);
    expect(parseJobUsers('alice', lookup)).toEqual({ kind: 'pool', users: [{ uid: 1001, gid: 1001, name: 'alice' }] });
    expect(() => parseJobUsers('root', lookup)).toThrow(/root; jobs must run unprivileged/);
    expect(() => parseJobUsers('nobody-here', lookup)).toThrow(/no user named "nobody-here"/);
    expect(() => parseJobUsers('10-20')).toThrow(/1000 <= A <= B/);
    expect(() => parseJobUsers('5000-4000')).toThrow(/1000 <= A <= B/);
    expect(() => parseJobUsers('1000-999999')).toThrow(/at most 65536/);
    expect(() => parseJobUsers('a b;rm')).toThrow(/expected "agent", or uid ranges A-B and user names/);
  });

  it('defaults to a pool of uids as root and to the agent\'s own user otherwise', () => {
    const dir = tmp();
    expect(JobUsers.of(undefined, dir, false)).toBeNull();
    expect(JobUsers.of('', dir, false)).toBeNull();
    expect(JobUsers.of(undefined, dir, true)!.describe()).toBe(`uids ${DEFAULT_JOB_UIDS}`);
    expect(JobUsers.of('agent', dir, true)).toBeNull();
    expect(() => JobUsers.of('5000-5001', dir, false)).toThrow(/only an agent running as root/);
  });

  it('gives each project a uid of its own, kept across restarts, and says when the pool is used up', () => {
    const dir = tmp();
    const a = JobUsers.of('5000-5001', dir, true)!;
    expect(a.forProject('prj-a').uid).toBe(5000);
    expect(a.forProject('prj-b').uid).toBe(5001);
    expect(a.forProject('prj-a').uid).toBe(5000);
    expect(() => a.forProject('prj-c')).toThrow(/no job user left for project prj-c/);
    expect(fs.statSync(path.join(dir, 'job-users.json')).mode & 0o777).toBe(0o600);
    // A restarted agent: the same uids for the same projects.
    const again = JobUsers.of('5000-5001', dir, true)!;
    expect(again.forProject('prj-b').uid).toBe(5001);
    // A narrower pool forgets uids it no longer holds.
    expect(JobUsers.of('5001-5001', dir, true)!.forProject('prj-b').uid).toBe(5001);
    expect(a.uidRanges()).toEqual([[5000, 5001]]);
  });
});

describe('the port guard', () => {
  it('refuses job uids every local address of a local endpoint, and a remote one on its address', () => {
    const rules = guardRuleset('gpuplane_n1', [[3000000, 3000999], [4000, 4000]], [7233, 8233, 7233], [{ family: 'ip', addr: '10.0.0.5', port: 5432 }]);
    expect(rules).toContain('meta skuid { 3000000-3000999, 4000 } fib daddr type local tcp dport { 7233, 8233 } reject with tcp reset');
    expect(rules).toContain('meta skuid { 3000000-3000999, 4000 } ip daddr 10.0.0.5 tcp dport 5432 reject with tcp reset');
    // Replaced whole on a restart.
    expect(rules.indexOf('delete table inet gpuplane_n1')).toBeLessThan(rules.indexOf('table inet gpuplane_n1 {'));
    expect(guardTableName('gpu-01.lab')).toBe('gpuplane_gpu_01_lab');
  });

  it('reads HOST:PORT, and refuses anything else in one line', () => {
    expect(parseEndpoint('127.0.0.1:7233')).toEqual({ host: '127.0.0.1', port: 7233 });
    expect(parseEndpoint('[::1]:5432')).toEqual({ host: '::1', port: 5432 });
    expect(parseEndpoint('db.lab:5432')).toEqual({ host: 'db.lab', port: 5432 });
    expect(() => parseEndpoint('db.lab')).toThrow(/expected HOST:PORT/);
    expect(() => parseEndpoint('db.lab:70000')).toThrow(/expected HOST:PORT/);
  });

  it('finds the ports a process listens on', async () => {
    const server = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const port = (server.address() as net.AddressInfo).port;
    expect(listeningPorts(process.pid)).toContain(port);
    server.close();
  });
});

describe('handing a job its environment', () => {
  it('is NAME=VALUE, each ended by a NUL, with nothing that could not be a variable', () => {
    expect(envBlock({ A: '1', B: 'x y\nz', 'C=D': 'no', E: undefined }).toString()).toBe('A=1\0B=x y\nz\0');
  });
});

describe('--token-file', () => {
  it('reads a 0600 file, refuses one other users can read or one without a token, never repeating it', () => {
    const dir = tmp();
    const file = path.join(dir, 'node.token');
    const token = newToken();
    fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
    expect(readNodeTokenFile(file)).toBe(token);
    fs.chmodSync(file, 0o644);
    expect(() => readNodeTokenFile(file)).toThrow(/can be read by other users \(mode 644\): chmod 600/);
    fs.writeFileSync(path.join(dir, 'bad'), 'not-a-token', { mode: 0o600 });
    let message = '';
    try {
      readNodeTokenFile(path.join(dir, 'bad'));
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/holds no GPUPlane token/);
    expect(message).not.toContain('not-a-token');
    expect(() => readNodeTokenFile(path.join(dir, 'missing'))).toThrow(/not found/);
  });
});
