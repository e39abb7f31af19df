import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processStartTime } from '../activities/gpu-host/proc.ts';
import { startOrAdoptPeerKeeper, watchPeerKeeper } from '../workers/gpu-host/peer-keeper.ts';
import { pidAlive, until } from './support/poll.ts';

/**
 * The peer keeper as a real process (issue 46), against a stand-in API that records its reports:
 * started once and adopted after, it says whether its agent lives, speaks for the node while an
 * attempt lives without an agent, and exits once there is neither; killed alone while its agent
 * watches, it is started again and reports from its new address.
 */
describe('peer keeper', () => {
  let dir: string;
  let server: http.Server;
  let apiUrl: string;
  const reports: { agent_alive?: boolean; peer_addr: string | null; at: number }[] = [];
  /** Keepers to kill at the end, whatever a case left (pid and start time: a pid may be reused). */
  const keepers: { pid: number; startTime: string | null }[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peer-keeper-'));
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        reports.push({ ...(JSON.parse(body) as (typeof reports)[number]), at: Date.now() });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ interval_ms: 1000, key: 'ab'.repeat(32), witnesses: [], subjects: [], ignored: [] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    for (const k of keepers) if (k.startTime !== null && processStartTime(k.pid) === k.startTime) process.kill(k.pid, 'SIGKILL');
    server?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is started once, adopted after, speaks for a node whose agent is gone while an attempt lives, and exits after', async () => {
    const conf = { apiUrl, nodeId: 'pk-1', host: '127.0.0.1', port: 0, runDir: dir };
    const first = await startOrAdoptPeerKeeper(conf);
    keepers.push(first);
    expect(first.adopted).toBe(false);
    await until('a report from it', () => reports.some((r) => r.agent_alive === true && r.peer_addr === first.addr), 10_000);
    const again = await startOrAdoptPeerKeeper(conf);
    expect(again).toEqual({ ...first, adopted: true });
    expect(fs.statSync(path.join(dir, 'peer-keeper.conf')).mode & 0o777).toBe(0o600);

    // An attempt that lives (a record as the agent writes it), and an agent that is gone.
    const job = spawn('sleep', ['60'], { stdio: 'ignore' });
    fs.writeFileSync(path.join(dir, 'j1.1.json'), JSON.stringify({ pid: job.pid, startTime: processStartTime(job.pid!), spec: { jobId: 'j1', attempt: 1 } }));
    const gone = JSON.parse(fs.readFileSync(path.join(dir, 'peer-keeper.conf'), 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(path.join(dir, 'peer-keeper.conf'), JSON.stringify({ ...gone, agentPid: 999_999_999, agentStartTime: 'never' }));
    const n = reports.length;
    await until('a report that the agent is gone', () => reports.slice(n).some((r) => r.agent_alive === false), 10_000);
    expect(pidAlive(first.pid)).toBe(true);

    // The attempt ends: nothing to speak for.
    job.kill('SIGKILL');
    await until('the keeper gone', () => !pidAlive(first.pid), 10_000);
    expect(fs.existsSync(path.join(dir, 'peer-keeper.pid'))).toBe(false);
  });

  it('killed alone while its agent watches, is started again, and reports from its new address within seconds', async () => {
    // This test process is the agent: the file names it, and it lives.
    const conf = { apiUrl, nodeId: 'pk-2', host: '127.0.0.1', port: 0, runDir: dir };
    const first = await startOrAdoptPeerKeeper(conf);
    keepers.push(first);
    expect(first.adopted).toBe(false);
    const said: string[] = [];
    const watch = watchPeerKeeper(conf, first, (line) => said.push(line));
    try {
      await until('a report from the first keeper', () => reports.some((r) => r.agent_alive === true && r.peer_addr === first.addr), 10_000);
      const n = reports.length;
      const killedAt = Date.now();
      process.kill(first.pid, 'SIGKILL');
      const line = await until('the watch saying it started another', () => said.find((l) => l.startsWith(`peer keeper ${first.pid} gone: started `)), 15_000);
      const second = Number(/started (\d+)/.exec(line)![1]);
      const record = JSON.parse(fs.readFileSync(path.join(dir, 'peer-keeper.pid'), 'utf8')) as { pid: number; startTime: string; addr: string };
      keepers.push(record);
      expect(second).not.toBe(first.pid);
      expect(record.pid).toBe(second);
      expect(line).toBe(`peer keeper ${first.pid} gone: started ${second}, heartbeats from ${record.addr}`);
      // Its reports name where it listens now: that is how the nodes that heartbeat to it learn the new port.
      const back = await until('a report from the new keeper', () => reports.slice(n).find((r) => r.agent_alive === true && r.peer_addr === record.addr), 10_000);
      process.stdout.write(`peer keeper SIGKILLed: a new one reported ${back.at - killedAt} ms after\n`);
      expect(back.at - killedAt).toBeLessThan(10_000);
      expect(said).toHaveLength(1);
      expect(pidAlive(second)).toBe(true);
    } finally {
      await watch.stop();
    }
  });
});
