import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { planeIdOf } from '../db/queries/plane.ts';
import { claimNamespace, connectClient, ensureNamespace, PLANE_KEY } from '../temporal/setup.ts';
import { openTestDatabase, type TestDatabase } from './support/test-database.ts';

/** Issue 27 §2: a plane never runs its workers on a namespace that carries another plane's jobs. */
describe('a plane and its Temporal namespace', () => {
  const opened: TestDatabase[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of closers) await c();
    for (const d of opened) await d.close();
  });

  it('each database is one plane; the first plane claims a namespace, and a second is refused in one line', async () => {
    const a = await openTestDatabase('plane-a', 'postgres');
    const b = await openTestDatabase('plane-b', 'pglite');
    opened.push(a, b);
    const planeA = await planeIdOf(a.database.db);
    expect(planeA).toMatch(/^plane-/);
    // One row, whoever asks (and however often).
    expect(await Promise.all([planeIdOf(a.database.db), planeIdOf(a.database.db)])).toEqual([planeA, planeA]);
    const planeB = await planeIdOf(b.database.db);
    expect(planeB).not.toBe(planeA);

    const address = inject('temporalAddress');
    const namespace = `plane-${randomBytes(4).toString('hex')}`;
    await ensureNamespace(address, namespace);
    const t = await connectClient(address, namespace);
    closers.push(t.close);
    await claimNamespace(t.client, namespace, planeA, address);
    // Again (a restart, a second control worker of the same plane): fine.
    await claimNamespace(t.client, namespace, planeA, address);
    const d = await t.client.connection.workflowService.describeNamespace({ namespace });
    expect(d.namespaceInfo?.data?.[PLANE_KEY]).toBe(planeA);
    const refused = await claimNamespace(t.client, namespace, planeB, address).then(
      () => null,
      (err: Error) => err.message,
    );
    expect(refused).toBe(
      `the Temporal namespace "${namespace}" at ${address} belongs to another GPUPlane (plane ${planeA}; this database is plane ${planeB}): give this plane a namespace of its own (TEMPORAL_NAMESPACE) or a Temporal server of its own (gpuctl up --temporal-port P)`,
    );
  });
});
