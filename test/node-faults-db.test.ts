import type { Client } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { finishActivities } from '../activities/control/finish.ts';
import { type DatabaseHandle } from '../db/client.ts';
import { getJob, insertJob, transitionJob } from '../db/queries/jobs.ts';
import { runSchedulePass } from '../scheduler/pass.ts';
import type { JobTimeouts } from '../temporal/client-ops.ts';
import type { AttemptOutcome } from '../workflows/types.ts';
import { QUARANTINE_BY, recordNodeFault } from '../db/queries/node-faults.ts';
import { drainNode, getNode, resumeNode, upsertNodeOnline } from '../db/queries/nodes.ts';
import { events } from '../db/schema.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { bothBackends } from './support/test-database.ts';

const [[, postgres], [, pglite]] = bothBackends('t_faults');

const rule = { after: 3, windowMs: 600_000 };
type Db = DatabaseHandle['db'];
/** Jobs job-1 … job-N (a fault event names its job). */
const jobs = async (db: Db, n: number) => {
  for (let i = 1; i <= n; i++) await insertJob(db, { id: `job-${i}`, type: 'CUSTOM', state: 'CREATED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
};
const t0 = Date.parse('2026-12-01T10:00:00Z');
const at = (s: number) => new Date(t0 + s * 1000);

describe.each([
  ['PostgreSQL', postgres],
  ['PGlite', pglite],
])('bad-node quarantine on %s', (_name, open) => {
  it('drains a node at its K-th fault within the window, with the reason and events; faults before the window or its last resume do not count', async () => {
    const { db } = await open();
    await jobs(db, 8);
    await upsertNodeOnline(db, { nodeId: 'q1', hostname: 'h', labels: {}, gpus: fakeGpus('q1', 2) });
    await upsertNodeOnline(db, { nodeId: 'q2', hostname: 'h', labels: {}, gpus: fakeGpus('q2', 2) });
    const fault = (nodeId: string, n: number, s: number, cause: 'lost' | 'hardware' = 'lost') =>
      db.transaction((tx) => recordNodeFault(tx, { nodeId, jobId: `job-${n}`, attempt: 1, cause }, rule, at(s)));

    // One fault long ago, then two within the window: not yet.
    expect(await fault('q1', 1, 0)).toBeNull();
    expect(await fault('q1', 2, 700)).toBeNull();
    expect(await fault('q1', 3, 800, 'hardware')).toBeNull();
    // Another node's faults are its own.
    expect(await fault('q2', 4, 810)).toBeNull();
    expect((await getNode(db, 'q1'))!.drainedAt).toBeNull();
    // The third within the window quarantines it.
    const reason = await fault('q1', 5, 900);
    expect(reason).toBe('quarantined: 3 attempts ended LOST or with a GPU/driver error within 10 min (job-5#1 LOST, job-3#1 GPU/driver error, job-2#1 LOST); gpuctl node resume once it is fixed');
    const q1 = (await getNode(db, 'q1'))!;
    expect(q1.drainReason).toBe(reason);
    expect(q1.drainedBy).toBe(QUARANTINE_BY);
    expect((await getNode(db, 'q2'))!.drainedAt).toBeNull();
    const kinds = (await db.select().from(events)).map((e) => e.kind);
    expect(kinds.filter((k) => k === 'node.fault')).toHaveLength(5);
    expect(kinds.filter((k) => k === 'node.quarantined')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'node.drained')).toHaveLength(1);

    // Resumed by an admin: a clean slate; two more faults do not quarantine it again, a third does.
    await db.transaction((tx) => resumeNode(tx, 'q1', 'ops', at(1000)));
    expect(await fault('q1', 6, 1010)).toBeNull();
    expect(await fault('q1', 7, 1020)).toBeNull();
    expect(await fault('q1', 8, 1030)).toMatch(/^quarantined: 3 attempts .*\(job-8#1 LOST, job-7#1 LOST, job-6#1 LOST\)/);
  });

  it("keeps an admin's drain and reason; with K = 0 it records faults and drains nothing", async () => {
    const { db } = await open();
    await jobs(db, 4);
    await upsertNodeOnline(db, { nodeId: 'q3', hostname: 'h', labels: {}, gpus: fakeGpus('q3', 1) });
    await upsertNodeOnline(db, { nodeId: 'q4', hostname: 'h', labels: {}, gpus: fakeGpus('q4', 1) });
    await db.transaction((tx) => drainNode(tx, 'q3', { reason: 'disk swap', by: 'ops' }, at(0)));
    for (let n = 1; n <= 4; n++) {
      expect(await db.transaction((tx) => recordNodeFault(tx, { nodeId: 'q3', jobId: `job-${n}`, attempt: 1, cause: 'lost' }, rule, at(n)))).toBeNull();
      expect(await db.transaction((tx) => recordNodeFault(tx, { nodeId: 'q4', jobId: `job-${n}`, attempt: 1, cause: 'lost' }, { after: 0, windowMs: 600_000 }, at(n)))).toBeNull();
    }
    expect((await getNode(db, 'q3'))!.drainReason).toBe('disk swap');
    expect((await getNode(db, 'q4'))!.drainedAt).toBeNull();
  });
});

/** finishAttempt's deps on a database alone: its Temporal calls (the suspect signal) go nowhere. */
const controlOn = (db: Db, quarantine: { after: number; windowMs: number }) =>
  finishActivities({
    deps: { db, client: { workflow: { getHandle: () => ({ signal: async () => undefined }) } } as unknown as Client, timeouts: {} as JobTimeouts, backfillHoldMs: 0, quarantine },
    wake: async () => undefined,
  });
const lostOutcome = (reason: string, stopped: boolean): AttemptOutcome => ({ state: 'LOST', exitCode: null, signal: null, reason, ...(stopped ? { lostCause: 'agent-stopped' as const } : {}) });

describe.each([
  ['PostgreSQL', postgres],
  ['PGlite', pglite],
])('attempts LOST to a deliberate stop of their agent on %s', (_name, open) => {
  it('are re-queued and never count toward quarantine; losses of a silent node do', async () => {
    const { db } = await open();
    await upsertNodeOnline(db, { nodeId: 'vm', hostname: 'h', labels: {}, gpus: fakeGpus('vm', 3) });
    const ids = ['job-a', 'job-b', 'job-c'];
    for (const id of ids) {
      await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
      await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(Date.now() - 1000) } }));
    }
    const place = async (n: number) => {
      expect((await runSchedulePass(db, 0, new Date())).placements).toHaveLength(n);
      await db.execute(sql`update jobs set state = 'RUNNING' where state = 'DISPATCHING'`);
      await db.execute(sql`update job_attempts set state = 'RUNNING' where state = 'DISPATCHING'`);
    };
    await place(3);
    const control = controlOn(db, { after: 3, windowMs: 3600_000 });
    // The plane restarted: each agent-stopped attempt is LOST and re-queued, and the node is no worse for it.
    for (const id of ids) {
      expect(await control.finishAttempt({ jobId: id, attempt: 1, outcome: lostOutcome('lost contact with node vm: the agent was stopped (SIGINT/SIGTERM) while the attempt ran', true) })).toEqual({ state: 'LOST', requeue: true });
    }
    expect((await getNode(db, 'vm'))!.drainedAt).toBeNull();
    const kinds = (await db.select().from(events)).map((e) => e.kind);
    expect(kinds.filter((k) => k === 'node.fault')).toHaveLength(0);
    for (const id of ids) expect((await getJob(db, id))!.attempt).toBe(2);
    // Back up, the attempts run again; this time the node goes silent under them: 3 faults, quarantined.
    await upsertNodeOnline(db, { nodeId: 'vm', hostname: 'h', labels: {}, gpus: fakeGpus('vm', 3) });
    // The job workflow re-queues the next attempt (enqueueAttempt): here, by hand.
    for (const id of ids) await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 2, from: ['LOST'], to: 'QUEUED', job: { queuedAt: new Date(Date.now() - 1000) } }));
    await place(3);
    for (const id of ids) await control.finishAttempt({ jobId: id, attempt: 2, outcome: lostOutcome('lost contact with node vm: heartbeat timeout', false) });
    const vm = (await getNode(db, 'vm'))!;
    expect(vm.drainedBy).toBe(QUARANTINE_BY);
    expect(vm.drainReason).toMatch(/^quarantined: 3 attempts ended LOST .*\(job-c#2 LOST, job-b#2 LOST, job-a#2 LOST\)/);
  });
});
