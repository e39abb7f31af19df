/**
 * The console's change counters (db/queries/changes.ts), on PostgreSQL and PGlite: a write that
 * changes what a page shows moves its topic's counter, one that changes nothing does not
 * (migrations 0004_console_changes, 0023_statement_change_triggers and 0028_sweeps_changes), and a
 * scheduling pass's set-based writes move the jobs and nodes counters.
 */
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import type { Db } from '../db/client.ts';
import { readVersions, type ChangeTopic } from '../db/queries/changes.ts';
import { dispatchPlacements } from '../db/queries/dispatch.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { touchNodesSeen, upsertNodeOnline } from '../db/queries/nodes.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { bothBackends } from './support/test-database.ts';

/** Which topics `write` moved. */
async function moved(db: Db, write: () => Promise<unknown>): Promise<ChangeTopic[]> {
  const before = await readVersions(db);
  await write();
  const after = await readVersions(db);
  return (['jobs', 'nodes', 'sweeps'] as const).filter((t) => after[t] !== before[t]);
}

const job = (id: string) => ({ id, type: 'CUSTOM' as const, state: 'CREATED' as const, gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });

describe.each(bothBackends('console-changes'))('console change counters on %s', (_name, open) => {
  it('move on a job inserted, changed or deleted, and not on an update that changes nothing', async () => {
    const { db } = await open();
    expect(await moved(db, () => insertJob(db, job('j1')))).toEqual(['jobs']);
    expect(await moved(db, () => db.execute(sql`update jobs set priority = 3 where id = 'j1'`))).toEqual(['jobs']);
    expect(await moved(db, () => db.execute(sql`update jobs set priority = 3 where id = 'j1'`))).toEqual([]);
    expect(await moved(db, () => db.execute(sql`update jobs set priority = 4 where id = 'nobody'`))).toEqual([]);
    // Many rows in one statement, only one of them changed: still a change.
    await insertJob(db, job('j2'));
    expect(await moved(db, () => db.execute(sql`update jobs set priority = case when id = 'j2' then 5 else priority end`))).toEqual(['jobs']);
    expect(await moved(db, () => db.execute(sql`insert into job_transitions (job_id, attempt, from_state, to_state) values ('j1', 1, 'CREATED', 'CREATED')`))).toEqual(['jobs']);
    expect(await moved(db, () => db.execute(sql`delete from job_transitions where job_id = 'j1' and from_state = 'CREATED'`))).toEqual(['jobs']);
    expect(await moved(db, () => db.execute(sql`delete from job_transitions where job_id = 'nobody'`))).toEqual([]);
    await insertJob(db, job('j3'));
    await db.execute(sql`delete from events where job_id = 'j3'`);
    await db.execute(sql`delete from job_transitions where job_id = 'j3'`);
    await db.execute(sql`delete from job_attempts where job_id = 'j3'`);
    expect(await moved(db, () => db.execute(sql`delete from jobs where id = 'j3'`))).toEqual(['jobs']);
  });

  it("move on a node's cards added, claimed or released, and not on a heartbeat or the same inventory again", async () => {
    const { db } = await open();
    const inv = { nodeId: 'n1', hostname: 'h1', labels: {}, gpus: fakeGpus('n1', 2) };
    expect(await moved(db, () => upsertNodeOnline(db, inv))).toEqual(['nodes']);
    expect(await moved(db, () => upsertNodeOnline(db, inv))).toEqual([]);
    expect(await moved(db, () => touchNodesSeen(db, [{ nodeId: 'n1', at: new Date(Date.now() + 60_000) }], 0))).toEqual([]);
    expect(await moved(db, () => upsertNodeOnline(db, { ...inv, gpus: fakeGpus('n1', 3) }))).toEqual(['nodes']);
    await insertJob(db, job('j1'));
    expect(await moved(db, () => db.execute(sql`update gpu_slots set owner_job_id = 'j1', owner_attempt = 1 where node_id = 'n1' and index = 0`))).toEqual(['nodes']);
    expect(await moved(db, () => db.execute(sql`update gpu_slots set owner_job_id = null, owner_attempt = null where owner_job_id = 'j1'`))).toEqual(['nodes']);
    expect(await moved(db, () => db.execute(sql`update gpu_slots set owner_job_id = null, owner_attempt = null where owner_job_id = 'j1'`))).toEqual([]);
    expect(await moved(db, () => db.execute(sql`delete from gpu_slots where node_id = 'n1' and index = 2`))).toEqual(['nodes']);
  });

  it("move on a sweep's row or a trial's created, changed or ended, and not on an update that changes nothing", async () => {
    const { db } = await open();
    expect(await moved(db, () => db.execute(sql`insert into sweeps (id, spec, state) values ('s1', '{"method": "grid"}', 'RUNNING')`))).toEqual(['sweeps']);
    await insertJob(db, job('t0'));
    expect(await moved(db, () => db.execute(sql`insert into sweep_trials (sweep_id, trial, job_id, params) values ('s1', 0, 't0', '{"lr": 0.1}')`))).toEqual(['sweeps']);
    // A trial stopped at a rung; then the same again.
    expect(await moved(db, () => db.execute(sql`update sweep_trials set rung = 0, stopped_reason = 'below the rung' where sweep_id = 's1'`))).toEqual(['sweeps']);
    expect(await moved(db, () => db.execute(sql`update sweep_trials set rung = 0, stopped_reason = 'below the rung' where sweep_id = 's1'`))).toEqual([]);
    expect(await moved(db, () => db.execute(sql`update sweeps set state = 'SUCCEEDED', ended_at = now() where id = 's1'`))).toEqual(['sweeps']);
    expect(await moved(db, () => db.execute(sql`update sweeps set state = 'SUCCEEDED' where id = 's1'`))).toEqual([]);
    expect(await moved(db, () => db.execute(sql`delete from sweep_trials where sweep_id = 's1'`))).toEqual(['sweeps']);
  });

  it("move on a scheduling pass's placements, applied in one statement", async () => {
    const { db } = await open();
    await upsertNodeOnline(db, { nodeId: 'n1', hostname: 'h1', labels: {}, gpus: fakeGpus('n1', 4) });
    for (const id of ['a', 'b']) {
      await insertJob(db, job(id));
      await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date() } }));
    }
    const placements = [
      { jobId: 'a', attempt: 1, nodeId: 'n1', gpuIndices: [0] },
      { jobId: 'b', attempt: 1, nodeId: 'n1', gpuIndices: [1] },
    ];
    expect(await moved(db, () => db.transaction((tx) => dispatchPlacements(tx, placements, new Date())))).toEqual(['jobs', 'nodes']);
    // Nothing left QUEUED to move: the same plan again writes nothing, and moves nothing.
    expect(await moved(db, () => db.transaction((tx) => dispatchPlacements(tx, placements, new Date())))).toEqual([]);
  });
});
