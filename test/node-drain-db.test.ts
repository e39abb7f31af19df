import { describe, expect, it } from 'vitest';
import { type DatabaseHandle } from '../db/client.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { drainNode, getNode, resumeNode, upsertNodeOnline } from '../db/queries/nodes.ts';
import { runSchedulePass } from '../scheduler/pass.ts';
import { handOnFreedCards, placeAlone } from '../scheduler/fast-paths.ts';
import { nodeRooms } from '../db/queries/node-rooms.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { bothBackends } from './support/test-database.ts';

const [[, postgres], [, pglite]] = bothBackends('t_drain');

type Db = DatabaseHandle['db'];
const queue = async (db: Db, id: string, gpus: number, at: number, nodes = 1) => {
  await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', gpus, nodes, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
  await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(at) } }));
};

/** Every path that picks nodes skips a drained one: the pass (gangs too), the queue-empty fast path, the hand-on of freed cards. */
describe.each([
  ['PostgreSQL', postgres],
  ['PGlite', pglite],
])('a drained node on %s', (_name, open) => {
  it('gets no placement from any path, keeps its drain when its agent reports again, and takes jobs once resumed', async () => {
    const { db } = await open();
    // d1 fits best (fewest free cards): without the drain every job below would go there.
    await upsertNodeOnline(db, { nodeId: 'd1', hostname: 'h', labels: {}, gpus: fakeGpus('d1', 2) });
    await upsertNodeOnline(db, { nodeId: 'd2', hostname: 'h', labels: {}, gpus: fakeGpus('d2', 4) });
    await upsertNodeOnline(db, { nodeId: 'd3', hostname: 'h', labels: {}, gpus: fakeGpus('d3', 4) });
    const drained = await db.transaction((tx) => drainNode(tx, 'd1', { reason: 'disk swap', by: 'ops' }));
    expect(drained).toMatchObject({ drainReason: 'disk swap', drainedBy: 'ops' });
    expect(await db.transaction((tx) => drainNode(tx, 'nope', { reason: null, by: 'ops' }))).toBeUndefined();
    // Its agent reports again (a restart, a new lease): the drain stays.
    await upsertNodeOnline(db, { nodeId: 'd1', hostname: 'h', labels: {}, gpus: fakeGpus('d1', 2) });
    expect((await getNode(db, 'd1'))?.drainedAt).toBeInstanceOf(Date);
    expect((await nodeRooms(db)).map((r) => r.id).sort()).toEqual(['d2', 'd3']);

    await queue(db, 'alone', 1, 1_000);
    const alone = await db.transaction((tx) => placeAlone(tx, { id: 'alone', attempt: 1, gpus: 1, selector: {} }, new Date()));
    expect(alone.placement?.nodeId).toBe('d2');
    await queue(db, 'gang', 1, 2_000, 2);
    const gang = await db.transaction((tx) => placeAlone(tx, { id: 'gang', attempt: 1, gpus: 1, nodes: 2, selector: {} }, new Date()));
    expect(gang.placement?.nodeId).not.toBe('d1');
    expect(gang.placement?.members?.map((m) => m.nodeId).sort()).toEqual(['d2', 'd3']);
    for (let i = 0; i < 4; i++) await queue(db, `p${i}`, 1, 3_000 + i);
    const pass = await runSchedulePass(db, 3_600_000, new Date(10_000));
    expect(pass.placements.map((p) => p.nodeId)).not.toContain('d1');
    for (let i = 0; i < 4; i++) await queue(db, `h${i}`, 1, 4_000 + i);
    const handed = await db.transaction((tx) => handOnFreedCards(tx, 3_600_000, new Date(10_000)));
    expect(handed.placed.map((p) => p.nodeId)).not.toContain('d1');

    expect((await db.transaction((tx) => resumeNode(tx, 'd1', 'ops')))?.drainedAt).toBeNull();
    expect((await db.transaction((tx) => resumeNode(tx, 'd1', 'ops')))?.drainedAt).toBeNull();
    const after = await runSchedulePass(db, 3_600_000, new Date(10_000));
    expect(after.placements.map((p) => p.nodeId)).toContain('d1');
  });
});
