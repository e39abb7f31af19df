import { and, eq, isNotNull } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { beginIn } from '../activities/control/begin.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { runSchedulePass } from '../scheduler/pass.ts';
import { gpuSlots, jobAttempts, jobs } from '../db/schema.ts';
import { masterPortFor } from '../domain/gang-env.ts';
import { bothBackends } from './support/test-database.ts';

const [[, postgres], [, pglite]] = bothBackends('t_gang');

/**
 * A gang in the database: placed in one pass on N distinct nodes or not at all, every member's
 * cards claimed, and a rendezvous port no other live gang with the same rank-0 node holds.
 */
describe.each([
  ['PostgreSQL', postgres],
  ['PGlite', pglite],
])('gangs in the catalogue on %s', (_name, open) => {
  it('places gangs whole or not at all, claims every member, and gives two gangs on one rank-0 node different ports', async () => {
    const { db } = await open();
    for (const n of ['n1', 'n2']) await upsertNodeOnline(db, { nodeId: n, hostname: n, labels: {}, address: `10.0.0.${n.slice(1)}`, gpus: fakeGpus(n, 2) });
    for (const id of ['ga', 'gb', 'gc']) {
      await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', gpus: 1, nodes: 2, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
      await transitionJob(db, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(Date.now() + Number(id === 'gc')) } });
    }
    const pass = await runSchedulePass(db, 300_000);
    // Two gangs of 2 × 1 fill two 2-card nodes; the third waits and holds nothing.
    expect(pass.placements.map((p) => p.jobId).sort()).toEqual(['ga', 'gb']);
    expect(pass.queued).toBe(1);
    for (const p of pass.placements) expect(new Set(p.members!.map((m) => m.nodeId)).size).toBe(2);
    const owned = await db.select({ job: gpuSlots.ownerJobId, node: gpuSlots.nodeId }).from(gpuSlots).where(isNotNull(gpuSlots.ownerJobId));
    expect(owned).toHaveLength(4);
    expect(owned.filter((o) => o.job === 'gc')).toHaveLength(0);
    const [gc] = await db.select({ state: jobs.state, members: jobs.members }).from(jobs).where(eq(jobs.id, 'gc'));
    expect(gc).toEqual({ state: 'QUEUED', members: null });

    // Begun: each member's node, address and cards, and the port.
    const specs = await Promise.all(['ga', 'gb'].map((id) => db.transaction((tx) => beginIn(tx, { jobId: id, attempt: 1 }))));
    for (const s of specs) {
      expect(s!.gang!.members.map((m) => m.address).sort()).toEqual(['10.0.0.1', '10.0.0.2']);
      expect(s!.gang!.rank).toBe(0);
      expect(s!.nodeId).toBe(s!.gang!.members[0].nodeId);
    }
    const rank0 = specs.map((s) => s!.gang!.members[0].nodeId);
    const ports = specs.map((s) => s!.gang!.masterPort);
    if (rank0[0] === rank0[1]) expect(ports[0]).not.toBe(ports[1]);
    // The port is the attempt's: asked again, the same.
    const again = await db.transaction((tx) => beginIn(tx, { jobId: 'ga', attempt: 1 }));
    expect(again!.gang!.masterPort).toBe(ports[0]);
    const [row] = await db.select({ members: jobAttempts.members, port: jobAttempts.masterPort }).from(jobAttempts).where(and(eq(jobAttempts.jobId, 'ga'), eq(jobAttempts.attempt, 1)));
    expect(row.port).toBe(ports[0]);
    expect(row.members!.map((m) => m.gpu_indices.length)).toEqual([1, 1]);
  });

  it('gives every live gang on one rank-0 node a port of its own', async () => {
    const { db } = await open();
    const names = ['m0', 'm1'];
    for (const n of names) await upsertNodeOnline(db, { nodeId: n, hostname: n, labels: {}, gpus: fakeGpus(n, 8) });
    // Eight 2-node gangs of one card on two 8-card nodes, each with m0 or m1 as rank 0; their ids
    // are picked in pairs whose first-choice port is the same, so only the lock and the taken
    // set keep them apart.
    const first = (id: string) => masterPortFor(id, 1, new Set())!;
    const seen = new Map<number, string>();
    const ids: string[] = [];
    for (let i = 0; ids.length < 8; i++) {
      const id = `p${i}`;
      const other = seen.get(first(id));
      if (other !== undefined) {
        ids.push(other, id);
        seen.delete(first(id));
      } else seen.set(first(id), id);
    }
    for (const id of ids) {
      await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', gpus: 1, nodes: 2, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
      await transitionJob(db, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date() } });
    }
    expect((await runSchedulePass(db, 300_000)).placements).toHaveLength(8);
    const specs = await Promise.all(ids.map((id) => db.transaction((tx) => beginIn(tx, { jobId: id, attempt: 1 }))));
    const byNode = new Map<string, number[]>();
    for (const s of specs) byNode.set(s!.gang!.members[0].nodeId, [...(byNode.get(s!.gang!.members[0].nodeId) ?? []), s!.gang!.masterPort]);
    for (const ports of byNode.values()) expect(new Set(ports).size).toBe(ports.length);
    // A pair whose first choices collide and share a rank-0 node: one got the next port.
    const pairs = Array.from({ length: 4 }, (_, k) => [specs[2 * k]!, specs[2 * k + 1]!]);
    const sharing = pairs.filter(([a, b]) => a.gang!.members[0].nodeId === b.gang!.members[0].nodeId);
    expect(sharing.length).toBeGreaterThan(0);
    for (const [a, b] of sharing) expect(a.gang!.masterPort).not.toBe(b.gang!.masterPort);
  });
});
