/**
 * The cap on shipped logs (domain/log-cap.ts, issue 39): one rank of an attempt keeps at most
 * the cap of stdout and stderr together. Through app.inject on PostgreSQL: the chunk that passes it is
 * cut and ends with the truncation line, whatever an agent sends after is refused; and the real
 * shipper over HTTP, whose file on the node stays whole.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogShipper } from '../activities/gpu-host/log-shipper.ts';
import { GpuplaneClient } from '../cli/client.ts';
import { logRefs, readLogs } from '../cli/client-logs.ts';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { formatCap, logCapBytesOf, roomUnderCap, truncationLine } from '../domain/log-cap.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const CAP = 1000;

describe('the log cap (domain/log-cap.ts)', () => {
  it('reads the setting in MiB (0: none), says the cap as the line does, and cuts only what passes it', () => {
    expect(logCapBytesOf(256)).toBe(256 * 1024 * 1024);
    expect(logCapBytesOf(0.5)).toBe(512 * 1024);
    expect(logCapBytesOf(0)).toBeNull();
    expect([formatCap(1024 * 1024), formatCap(256 * 1024 * 1024), formatCap(512 * 1024), formatCap(1000)]).toEqual(['1 MiB', '256 MiB', '0.5 MiB', '1000 bytes']);
    expect(truncationLine(1024 * 1024, 'n1', '/var/log/a.log')).toBe('gpuplane: log truncated at 1 MiB; the whole file is kept on node n1 at /var/log/a.log\n');
    expect(truncationLine(1024 * 1024, null, null)).toBe('gpuplane: log truncated at 1 MiB; the whole file is kept on its node\n');
    expect(roomUnderCap(null, 10 ** 12, 5)).toBeNull();
    expect(roomUnderCap(100, 90, 10)).toBeNull();
    expect(roomUnderCap(100, 90, 11)).toBe(10);
    expect(roomUnderCap(100, 150, 11)).toBe(0);
    expect(roomUnderCap(100, 150, 0)).toBeNull();
  });
});

describe('the log cap: the API', () => {
  let testApp: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let dir: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-log-cap-'));
    testApp = await startTestApp('log-cap', { temporal: false, listen: true, logCapBytes: CAP });
    ({ app, database } = testApp);
  });
  afterAll(async () => {
    await testApp?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const newJob = async (nodes = 1) => (await insertJob(database.db, { id: newId('job'), type: 'CUSTOM', state: 'CREATED', gpus: 0, nodes, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} })).id;
  const ship = (jobId: string, stream: string, offset: number, body: string | Buffer, extra = '') =>
    app.inject({
      method: 'POST',
      url: `/api/v1/jobs/${jobId}/attempts/1/logs/${stream}?offset=${offset}${extra}`,
      headers: { 'content-type': 'application/octet-stream' },
      payload: typeof body === 'string' ? Buffer.from(body) : body,
    });
  const read = async (jobId: string, q = '') => (await app.inject({ method: 'GET', url: `/api/v1/jobs/${jobId}/logs${q}` })).body;
  const line = (node = 'n1', at = '/logs/attempt-1.log') => `gpuplane: log truncated at 1000 bytes; the whole file is kept on node ${node} at ${at}\n`;

  it('cuts the chunk that passes the cap, appends the line, completes the stream, and refuses what an agent sends after', async () => {
    const id = await newJob();
    const where = '&node=n1&location=/logs/attempt-1.log';
    expect((await ship(id, 'stdout', 0, 'a'.repeat(599) + '\n', where)).json()).toEqual({ size_bytes: 600, stored_bytes: 600, complete: false });
    // 600 more: 400 fit; the cut falls mid-line, so the line starts a line of its own.
    const cut = (await ship(id, 'stdout', 600, 'b'.repeat(599) + '\n', where)).json();
    expect(cut).toEqual({ size_bytes: 1000 + 1 + line().length, stored_bytes: 400 + 1 + line().length, complete: true, truncated: true });
    expect(await read(id, '?stream=stdout')).toBe(`${'a'.repeat(599)}\n${'b'.repeat(400)}\n${line()}`);
    // A forged or old agent that goes on (from the file's offsets, or from the stored size): 409, nothing stored.
    for (const offset of [1200, cut.size_bytes]) {
      const more = await ship(id, 'stdout', offset, 'c'.repeat(100), where);
      expect(more.statusCode).toBe(409);
      expect(more.json()).toMatchObject({ complete: true });
    }
    const refused = await ship(id, 'stdout', cut.size_bytes, 'd');
    expect(refused.json().message).toMatch(/truncated at the log cap \(1000 bytes/);
    // The other stream shares the cap: its next bytes get only the line, with its own file named.
    const err = (await ship(id, 'stderr', 0, 'e'.repeat(50) + '\n', '&node=n1&location=/logs/attempt-1.stderr.log')).json();
    expect(err).toMatchObject({ complete: true, truncated: true, stored_bytes: line('n1', '/logs/attempt-1.stderr.log').length });
    expect(await read(id, '?stream=stderr')).toBe(line('n1', '/logs/attempt-1.stderr.log'));
    // A repeat of stored bytes is still acknowledged (a shipper whose answer was lost).
    expect((await ship(id, 'stdout', 0, 'a')).statusCode).toBe(200);
  });

  it('a single chunk far over the cap (a forged agent) keeps the cap and the line only; a cut at a line end adds no blank line', async () => {
    const id = await newJob();
    const big = Buffer.from('x'.repeat(999) + '\n' + 'y'.repeat(200 * 1024));
    const r = (await ship(id, 'stdout', 0, big, '&node=n9&location=/f.log')).json();
    expect(r).toEqual({ size_bytes: 1000 + line('n9', '/f.log').length, stored_bytes: 1000 + line('n9', '/f.log').length, complete: true, truncated: true });
    expect(await read(id, '?stream=stdout')).toBe(`${'x'.repeat(999)}\n${line('n9', '/f.log')}`);
  });

  it("under the cap nothing changes; each rank of a gang has a cap of its own", async () => {
    const id = await newJob(2);
    expect((await ship(id, 'stdout', 0, 'z'.repeat(1000), '&final=true')).json()).toEqual({ size_bytes: 1000, stored_bytes: 1000, complete: true });
    const r1 = (await ship(id, 'stdout', 0, 'w'.repeat(1500) + '\n', '&rank=1&node=n2&location=/r1.log')).json();
    expect(r1).toMatchObject({ size_bytes: 1001 + line('n2', '/r1.log').length, truncated: true });
    expect((await read(id, '?stream=stdout&rank=1')).endsWith(`w\n${line('n2', '/r1.log')}`)).toBe(true);
    expect(await read(id, '?stream=stdout')).toBe('z'.repeat(1000));
  });

  it('the shipper stops at the cap; the file on the node stays whole', async () => {
    const id = await newJob();
    const files = { stdout: path.join(dir, `${id}.log`), stderr: path.join(dir, `${id}.stderr.log`) };
    const text = Array.from({ length: 400 }, (_, i) => `line ${i}\n`).join('');
    fs.writeFileSync(files.stdout, text);
    fs.writeFileSync(files.stderr, '');
    const warnings: string[] = [];
    const shipper = new LogShipper({ apiUrl: testApp.url, nodeId: 'n1', jobId: id, attempt: 1, files, ended: Promise.resolve(), pollMs: 20, fresh: true, warn: (m) => warnings.push(m) });
    expect(await shipper.flush(10_000)).toBe(true);
    const client = new GpuplaneClient(testApp.url);
    const shipped = await readLogs(client, id, { stream: 'stdout' });
    const kept = text.slice(0, CAP);
    expect(shipped).toBe(`${kept}${kept.endsWith('\n') ? '' : '\n'}${line('n1', files.stdout)}`);
    expect((await logRefs(client, id, 1)).every((r) => r.complete)).toBe(true);
    expect(fs.readFileSync(files.stdout, 'utf8')).toBe(text);
    expect(warnings.some((w) => w.includes("log cap") && w.includes(files.stdout))).toBe(true);
  });
});
