import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processStartTime } from '../activities/gpu-host/proc.ts';
import { startOrAdoptPeerKeeper } from '../workers/gpu-host/peer-keeper.ts';
import { pidAlive, until } from './support/poll.ts';

/**
 * The peer keeper as a real process (issue 46), against a stand-in API that records its reports:
 * started once and adopted after, it says whether its agent lives, speaks for the node while an
 * attempt lives without an agent, and exits once there is neither.
 */
describe('peer keeper', () => {
  let dir: string;
  let server: http.Server;
  let apiUrl: string;
  const reports: { agent_alive?: boolean; peer_addr: string | null }[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'peer-keeper-'));
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        reports.push(JSON.parse(body) as (typeof reports)[number]);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ interval_ms: 1000, key: 'ab'.repeat(32), witnesses: [], subjects: [], ignored: [] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is started once, adopted after, speaks for a node whose agent is gone while an attempt lives, and exits after', async () => {
    const conf = { apiUrl, nodeId: 'pk-1', host: '127.0.0.1', port: 0, runDir: dir };
    const first = await startOrAdoptPeerKeeper(conf);
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
});
