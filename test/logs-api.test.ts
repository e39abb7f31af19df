import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { and, eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GpuplaneClient } from '../cli/client.ts';
import { logRefs, readLogs } from '../cli/client-logs.ts';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { readStdoutTail } from '../db/queries/evaluations.ts';
import { readLogTail } from '../db/queries/logs.ts';
import { jobAttempts, runs } from '../db/schema.ts';
import { LogShipper, LogShipping } from '../activities/gpu-host/log-shipper.ts';
import { until } from './support/poll.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** Log ingest and reads through app.inject on PostgreSQL; a follow and the shipper against the same app on a real port. */
describe('shipped logs: the API', () => {
  let testApp: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let url: string;
  let dir: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-logs-api-'));
    // The log routes never touch Temporal.
    testApp = await startTestApp('logs-api', { temporal: false, listen: true });
    ({ app, database, url } = testApp);
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
  const read = async (jobId: string, q = '') => {
    const res = await app.inject({ method: 'GET', url: `/api/v1/jobs/${jobId}/logs${q}` });
    return { status: res.statusCode, body: res.body, headers: res.headers };
  };
  const setAttempt = (jobId: string, set: { startedAt?: Date; endedAt?: Date }) =>
    database.db.update(jobAttempts).set(set).where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, 1)));

  it('stores chunks in order; an overlap is trimmed, a repeat stores nothing, a gap is 409 with the offset to resend from', async () => {
    const id = await newJob();
    expect((await ship(id, 'stdout', 0, 'one\n')).json()).toEqual({ size_bytes: 4, stored_bytes: 4, complete: false });
    // A shipper that re-sends bytes the API has (its ack was lost) plus new ones: only the new ones are stored.
    expect((await ship(id, 'stdout', 2, 'e\ntwo\n')).json()).toEqual({ size_bytes: 8, stored_bytes: 4, complete: false });
    expect((await ship(id, 'stdout', 0, 'one\n')).json()).toEqual({ size_bytes: 8, stored_bytes: 0, complete: false });
    const gap = await ship(id, 'stdout', 20, 'lost?\n');
    expect(gap.statusCode).toBe(409);
    expect(gap.json()).toMatchObject({ error: 'conflict', expected_offset: 8, complete: false });
    expect((await ship(id, 'stdout', 8, 'three\n', '&final=true&node=n1&location=/x/attempt-1.log')).json()).toEqual({ size_bytes: 14, stored_bytes: 6, complete: true });
    // Complete: a repeat is acknowledged, new bytes are refused.
    expect((await ship(id, 'stdout', 8, 'three\n')).statusCode).toBe(200);
    expect((await ship(id, 'stdout', 14, 'more\n')).json()).toMatchObject({ expected_offset: 14, complete: true });
    expect((await read(id, '?stream=stdout')).body).toBe('one\ntwo\nthree\n');
    expect((await read(id, '?stream=stdout&offset=5')).body).toBe('wo\nthree\n');
    const refs = (await app.inject({ method: 'GET', url: `/api/v1/jobs/${id}/logs/refs` })).json().refs;
    expect(refs).toEqual([expect.objectContaining({ job_id: id, attempt: 1, stream: 'stdout', node_id: 'n1', location: '/x/attempt-1.log', size_bytes: 14, complete: true, run_id: null })]);
  });

  it('refuses a bad stream, an unknown job or attempt, bad offsets and a chunk over 256 KiB', async () => {
    const id = await newJob();
    const bad = await ship(id, 'stdlog', 0, 'x');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('invalid');
    expect((await ship('job-nope', 'stdout', 0, 'x')).statusCode).toBe(404);
    const noAttempt = await app.inject({ method: 'POST', url: `/api/v1/jobs/${id}/attempts/7/logs/stdout?offset=0`, headers: { 'content-type': 'application/octet-stream' }, payload: Buffer.from('x') });
    expect(noAttempt.statusCode).toBe(404);
    expect(noAttempt.json().message).toContain('#7');
    expect((await ship(id, 'stdout', -1, 'x')).statusCode).toBe(400);
    expect((await app.inject({ method: 'POST', url: `/api/v1/jobs/${id}/attempts/1/logs/stdout`, headers: { 'content-type': 'application/octet-stream' }, payload: Buffer.from('x') })).statusCode).toBe(400);
    expect((await ship(id, 'stdout', 0, Buffer.alloc(256 * 1024 + 1, 97))).statusCode).toBe(413);
    expect((await ship(id, 'stdout', 0, Buffer.alloc(256 * 1024, 97))).json().size_bytes).toBe(256 * 1024);
    expect((await read('job-nope')).status).toBe(404);
    expect((await read(id, '?offset=3')).status).toBe(400);
    expect((await read(id, '?stream=both')).status).toBe(400);
    expect((await read(id, '?attempt=2')).status).toBe(404);
  });

  it('interleaves both streams by line in arrival order, never splicing a line', async () => {
    const id = await newJob();
    await ship(id, 'stdout', 0, 'out 1\nout 2 starts');
    await ship(id, 'stderr', 0, 'err 1\n');
    await ship(id, 'stdout', 18, ' and ends\n');
    await ship(id, 'stderr', 6, 'err 2 (no newline)');
    const all = await read(id);
    expect(all.headers['content-type']).toMatch(/^text\/plain/);
    expect(all.headers['x-gpuplane-attempt']).toBe('1');
    expect(all.body).toBe('out 1\nerr 1\nout 2 starts and ends\nerr 2 (no newline)');
    expect((await read(id, '?stream=stderr')).body).toBe('err 1\nerr 2 (no newline)');
    expect(await readLogTail(database.db, id, 1)).toBe('out 1\nout 2 starts and ends\n\nerr 1\nerr 2 (no newline)');
    expect(await readLogTail(database.db, await newJob(), 1)).toBeNull();
  });

  it("a gang's ranks ship the same offsets of the same stream: each rank's log is kept whole and apart", async () => {
    const id = await newJob(2);
    // Both members write their stdout from byte 0, in turns, with the same offsets.
    expect((await ship(id, 'stdout', 0, 'rank 0: one\n')).json()).toEqual({ size_bytes: 12, stored_bytes: 12, complete: false });
    expect((await ship(id, 'stdout', 0, 'rank 1: one\n', '&rank=1')).json()).toEqual({ size_bytes: 12, stored_bytes: 12, complete: false });
    expect((await ship(id, 'stdout', 12, 'rank 1: two\n', '&rank=1&node=n2&final=true')).json()).toEqual({ size_bytes: 24, stored_bytes: 12, complete: true });
    expect((await ship(id, 'stdout', 12, 'rank 0: two\n', '&rank=0&node=n1')).json()).toEqual({ size_bytes: 24, stored_bytes: 12, complete: false });
    expect((await ship(id, 'stderr', 0, 'rank 1 warns\n', '&rank=1')).statusCode).toBe(200);
    // Rank 1's stream being complete says nothing of rank 0's, and its gap is its own.
    expect((await ship(id, 'stdout', 24, 'rank 0: three\n')).json()).toEqual({ size_bytes: 38, stored_bytes: 14, complete: false });
    expect((await ship(id, 'stderr', 5, 'x', '&rank=0')).json()).toMatchObject({ expected_offset: 0 });
    const r0 = await read(id, '?stream=stdout');
    expect(r0.body).toBe('rank 0: one\nrank 0: two\nrank 0: three\n');
    expect([r0.headers['x-gpuplane-rank'], r0.headers['x-gpuplane-nodes']]).toEqual(['0', '2']);
    const r1 = await read(id, '?stream=stdout&rank=1');
    expect(r1.body).toBe('rank 1: one\nrank 1: two\n');
    expect(r1.headers['x-gpuplane-rank']).toBe('1');
    expect((await read(id, '?rank=1')).body).toBe('rank 1: one\nrank 1: two\nrank 1 warns\n');
    expect((await read(id, '?rank=1&stream=stdout&offset=8')).body).toBe('one\nrank 1: two\n');
    const refs = (await app.inject({ method: 'GET', url: `/api/v1/jobs/${id}/logs/refs?attempt=1` })).json().refs;
    expect(refs.map((r: { rank: number; stream: string; size_bytes: number; complete: boolean }) => [r.rank, r.stream, r.size_bytes, r.complete])).toEqual([
      [0, 'stdout', 38, false],
      [1, 'stderr', 13, false],
      [1, 'stdout', 24, true],
    ]);
    const one = (await app.inject({ method: 'GET', url: `/api/v1/jobs/${id}/logs/refs?rank=1` })).json().refs;
    expect(one.map((r: { rank: number; node_id: string | null }) => [r.rank, r.node_id])).toEqual([
      [1, null],
      [1, 'n2'],
    ]);
    // The tails read for failure hints and evaluation results are rank 0's unless told.
    expect(await readLogTail(database.db, id, 1)).toBe('rank 0: one\nrank 0: two\nrank 0: three\n');
    expect(await readLogTail(database.db, id, 1, 8192, 1)).toBe('rank 1: one\nrank 1: two\n\nrank 1 warns\n');
    expect((await readStdoutTail(database.db, id, 1, 100))?.text).toBe('rank 0: one\nrank 0: two\nrank 0: three\n');
    expect(await readStdoutTail(database.db, id, 1, 12, 1)).toEqual({ text: 'rank 1: two\n', partialStart: true, complete: true });
    // The CLI's client reads a rank and says how many the attempt has.
    const client = new GpuplaneClient(url);
    expect(await readLogs(client, id, { rank: 1, stream: 'stdout' })).toBe('rank 1: one\nrank 1: two\n');
    expect((await logRefs(client, id, 1, 0)).map((r) => r.stream)).toEqual(['stdout']);
  });

  it('refuses a rank the attempt does not have, and one out of range', async () => {
    const gang = await newJob(2);
    const single = await newJob();
    const noRank = await ship(gang, 'stdout', 0, 'x', '&rank=2');
    expect(noRank.statusCode).toBe(400);
    expect(noRank.json().message).toContain('has no rank 2: it spans 2 nodes');
    expect((await ship(single, 'stdout', 0, 'x', '&rank=1')).json().message).toContain('it spans 1 node (ranks 0 to 0)');
    for (const bad of ['-1', '1024', '01', 'x', '']) expect((await ship(gang, 'stdout', 0, 'x', `&rank=${bad}`)).statusCode).toBe(400);
    expect((await ship(gang, 'stdout', 0, 'x', '&rank=1023')).statusCode).toBe(400);
    expect((await read(gang, '?rank=2')).status).toBe(400);
    expect((await read(single, '?rank=1')).status).toBe(400);
    expect((await read(single, '?rank=0')).status).toBe(200);
    expect((await app.inject({ method: 'GET', url: `/api/v1/jobs/${gang}/logs/refs?rank=1024` })).statusCode).toBe(400);
    // A single-node job reads as it did before gangs: rank 0 of one node.
    const plain = await read(single);
    expect([plain.headers['x-gpuplane-rank'], plain.headers['x-gpuplane-nodes']]).toEqual(['0', '1']);
  });

  it("a job's Run reads its attempt's log; an SDK run has none", async () => {
    const id = await newJob();
    const runId = newId('run');
    await database.db.insert(runs).values({ id: runId, jobId: id, attempt: 1, source: 'job', status: 'running' });
    await ship(id, 'stdout', 0, 'from the run\n');
    expect((await app.inject({ method: 'GET', url: `/api/v1/runs/${runId}/logs` })).body).toBe('from the run\n');
    expect((await app.inject({ method: 'GET', url: `/api/v1/jobs/${id}/logs/refs?attempt=1` })).json().refs[0].run_id).toBe(runId);
    const sdk = newId('run');
    await database.db.insert(runs).values({ id: sdk, source: 'sdk', status: 'running' });
    expect((await app.inject({ method: 'GET', url: `/api/v1/runs/${sdk}/logs` })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/api/v1/runs/run-nope/logs` })).statusCode).toBe(404);
  });

  it('follow streams until the attempt ended and its streams are complete', async () => {
    const id = await newJob();
    await setAttempt(id, { startedAt: new Date() });
    await ship(id, 'stdout', 0, 'a\n');
    // Over a real socket, so what has streamed so far can be seen (app.inject answers at the end).
    const res = await fetch(`${url}/api/v1/jobs/${id}/logs?follow=true`);
    let text = '';
    let settled = false;
    const followed = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body!) text += decoder.decode(chunk, { stream: true });
      settled = true;
    })();
    await until('a streamed', () => text === 'a\n', 10_000, 20);
    // Ended, but neither stream is complete yet: each chunk shipped after the end still streams,
    // one look after another (the look that streams a chunk shipped after the previous one was
    // seen began after the end was stored).
    await setAttempt(id, { endedAt: new Date() });
    await ship(id, 'stdout', 2, 'b\n', '&final=true');
    await until('b streamed', () => text === 'a\nb\n', 10_000, 20);
    await ship(id, 'stderr', 0, 'e\n');
    await until('e streamed', () => text === 'a\nb\ne\n', 10_000, 20);
    // stderr is not complete yet: still open.
    expect(settled).toBe(false);
    await ship(id, 'stderr', 2, 'f\n', '&final=true');
    await followed;
    expect(res.status).toBe(200);
    expect(text).toBe('a\nb\ne\nf\n');
  });

  describe('gpuctl logs, as a child process', () => {
    const gpuctl = async (...args: string[]) => {
      try {
        const r = await promisify(execFile)(process.execPath, [path.resolve('cli/gpuctl.mjs'), '--api', url, ...args], { env: { ...process.env, GPUPLANE_LOG_LEVEL: 'warn' } });
        return { code: 0, stdout: r.stdout, stderr: r.stderr };
      } catch (err) {
        const e = err as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    };

    it("prints a gang's rank 0 with a hint naming --rank, another rank with --rank, and a RANK column in --refs", async () => {
      const id = await newJob(3);
      await ship(id, 'stdout', 0, 'zero\n');
      await ship(id, 'stdout', 0, 'two\n', '&rank=2&node=n3');
      const plain = await gpuctl('logs', id);
      expect(plain).toEqual({ code: 0, stdout: 'zero\n', stderr: `gpuctl: ${id}#1 spans 3 nodes; this is rank 0's log (--rank 1 to 2 for the others)\n` });
      expect(await gpuctl('logs', '--rank', '2', id)).toEqual({ code: 0, stdout: 'two\n', stderr: '' });
      // Asked for rank 0 by name: no hint.
      expect(await gpuctl('logs', '--rank', '0', '--stream', 'stdout', id)).toEqual({ code: 0, stdout: 'zero\n', stderr: '' });
      expect((await gpuctl('logs', '--rank', '1', id)).stdout).toBe('');
      const refs = (await gpuctl('logs', '--refs', id)).stdout.split('\n');
      expect(refs[0]).toMatch(/^ATTEMPT +RANK +STREAM +BYTES +COMPLETE +NODE +LOCATION$/);
      expect(refs.slice(1, 3).map((l) => l.split(/ +/).slice(0, 3))).toEqual([
        ['1', '0', 'stdout'],
        ['1', '2', 'stdout'],
      ]);
      expect((await gpuctl('logs', '--refs', '--rank', '2', id)).stdout.split('\n')).toHaveLength(3);
      for (const bad of [['--rank', '3'], ['--rank', '1024']]) {
        const r = await gpuctl('logs', ...bad, id);
        expect(r.code, bad.join(' ')).not.toBe(0);
        expect(r.stderr.trim().split('\n'), bad.join(' ')).toHaveLength(1);
        expect(r.stderr).toMatch(/^gpuctl: /);
      }
    });

    it("prints a single-node job's log and refs as before: no hint, no RANK column", async () => {
      const id = await newJob();
      await ship(id, 'stdout', 0, 'only\n');
      expect(await gpuctl('logs', id)).toEqual({ code: 0, stdout: 'only\n', stderr: '' });
      expect((await gpuctl('logs', '--refs', id)).stdout).toMatch(/^ATTEMPT +STREAM +BYTES +COMPLETE +NODE +LOCATION\n1 +stdout +5 /);
    });
  });

  describe('the shipper, over HTTP', () => {
    it('ships a growing file; a second shipper (a restarted agent) goes on from what the API has: no gap, no duplicate', async () => {
      const id = await newJob();
      const files = { stdout: path.join(dir, `${id}.log`), stderr: path.join(dir, `${id}.stderr.log`) };
      fs.writeFileSync(files.stdout, '');
      const lines = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `line ${from + i}\n`).join('');
      const client = new GpuplaneClient(url);
      const first = new LogShipper({ apiUrl: url, nodeId: 'n1', jobId: id, attempt: 1, files, ended: new Promise(() => undefined), pollMs: 50 });
      fs.appendFileSync(files.stdout, lines(0, 100));
      await until('first part shipped', async () => (await logRefs(client, id, 1)).find((r) => r.stream === 'stdout')?.size_bytes === lines(0, 100).length);
      first.stop();
      await first.done;
      // Written while no shipper ran, plus a big burst: more than one chunk.
      fs.appendFileSync(files.stdout, lines(100, 30_000));
      fs.writeFileSync(files.stderr, 'warning\n');
      let end!: () => void;
      const second = new LogShipper({ apiUrl: url, nodeId: 'n1', jobId: id, attempt: 1, files, ended: new Promise<void>((r) => (end = r)), pollMs: 50 });
      fs.appendFileSync(files.stdout, lines(30_000, 30_010));
      end();
      expect(await second.flush(20_000)).toBe(true);
      expect(await readLogs(client, id, { stream: 'stdout' })).toBe(lines(0, 30_010));
      expect(await readLogs(client, id, { stream: 'stderr' })).toBe('warning\n');
      const refs = await logRefs(client, id, 1);
      expect(refs.map((r) => [r.stream, r.complete])).toEqual([
        ['stderr', true],
        ['stdout', true],
      ]);
      expect(refs.find((r) => r.stream === 'stdout')!.size_bytes).toBe(lines(0, 30_010).length);
    });

    it("ships each member of a gang under its rank: two members' files of one attempt, read back apart", async () => {
      const id = await newJob(2);
      const filesOf = (rank: number) => ({ stdout: path.join(dir, `${id}.${rank}.log`), stderr: path.join(dir, `${id}.${rank}.stderr.log`) });
      const body = (rank: number) => Array.from({ length: 20_000 }, (_, i) => `rank ${rank} line ${i}\n`).join('');
      // Two agents' shippers (one LogShipping here, as a test may run two members on one host).
      const shipping = new LogShipping({ apiUrl: url, nodeId: 'n1', pollMs: 50 });
      let end!: () => void;
      const ended = new Promise<void>((r) => (end = r));
      for (const rank of [0, 1]) {
        fs.writeFileSync(filesOf(rank).stdout, body(rank));
        fs.writeFileSync(filesOf(rank).stderr, `rank ${rank} warns\n`);
        shipping.ship(id, 1, filesOf(rank).stdout, ended, true, rank);
      }
      // Keyed per rank: asking again for rank 1 is its running shipper, not a third one.
      expect(shipping.ship(id, 1, filesOf(1).stdout, ended, true, 1)).toBe(shipping.ship(id, 1, filesOf(1).stdout, ended, false, 1));
      end();
      expect(await shipping.flush(id, 1, 20_000, 0)).toBe(true);
      expect(await shipping.flush(id, 1, 20_000, 1)).toBe(true);
      const client = new GpuplaneClient(url);
      for (const rank of [0, 1]) {
        expect(await readLogs(client, id, { rank, stream: 'stdout' })).toBe(body(rank));
        expect(await readLogs(client, id, { rank, stream: 'stderr' })).toBe(`rank ${rank} warns\n`);
      }
      const refs = await logRefs(client, id, 1);
      expect(refs.map((r) => [r.rank, r.stream, r.complete, r.location])).toEqual([
        [0, 'stderr', true, filesOf(0).stderr],
        [0, 'stdout', true, filesOf(0).stdout],
        [1, 'stderr', true, filesOf(1).stderr],
        [1, 'stdout', true, filesOf(1).stdout],
      ]);
      // A restarted rank 1 asks what the API has of its own streams, and has nothing more to send.
      const again = new LogShipper({ apiUrl: url, nodeId: 'n1', jobId: id, attempt: 1, rank: 1, files: filesOf(1), ended: Promise.resolve(), pollMs: 50 });
      expect(await again.flush(10_000)).toBe(true);
      expect((await logRefs(client, id, 1, 1)).map((r) => r.size_bytes)).toEqual([Buffer.byteLength('rank 1 warns\n'), body(1).length]);
    });
  });
});
