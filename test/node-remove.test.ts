import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertJob } from '../db/queries/jobs.ts';
import { getNode, setNodeOffline, upsertNodeOnline } from '../db/queries/nodes.ts';
import { gpuSlots } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { nodeWorkflowId } from '../workflows/names.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const gpus = (n: number) => Array.from({ length: n }, (_, index) => ({ index, uuid: `GPU-${index}`, name: 'fake', memoryMb: 1000 }));

/** DELETE /api/v1/nodes/:id (gpuctl node remove): a node gone for good, its cards and its workflow go; refused while it lives or holds attempts. */
describe('removing a node', () => {
  let t: TestApp;
  const admin = newToken();
  const del = (id: string, token = admin) => t.app.inject({ method: 'DELETE', url: `/api/v1/nodes/${id}`, headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    t = await startTestApp('node-remove', { auth: { adminTokens: [admin] } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is refused while the node is ONLINE or holds an attempt, and then removes it and ends its workflow', async () => {
    const { db } = t.database;
    await upsertNodeOnline(db, { nodeId: 'gone1', hostname: 'h', labels: {}, gpus: gpus(2) });
    // Its liveness workflow, as the agent's first start leaves it (no worker here: it just waits).
    const handle = await t.client.workflow.start('nodeWorkflow', { taskQueue: 'node-remove-none', workflowId: nodeWorkflowId('gone1'), args: [{ nodeId: 'gone1', heartbeatTimeoutMs: 5000 }] });

    const member = await t.app.inject({ method: 'POST', url: '/api/v1/tokens', headers: { authorization: `Bearer ${admin}` }, payload: { name: 'm', role: 'member', projects: ['p'] } });
    expect((await del('gone1', member.json().token)).statusCode).toBe(403);
    expect((await del('nope')).statusCode).toBe(404);

    const online = await del('gone1');
    expect(online.statusCode).toBe(409);
    expect(online.json().message).toMatch(/^node gone1 is ONLINE: stop its agent first/);

    await setNodeOffline(db, 'gone1');
    await insertJob(db, { id: 'job-remove001', projectId: null, type: 'CUSTOM', state: 'RUNNING', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
    await db.update(gpuSlots).set({ ownerJobId: 'job-remove001', ownerAttempt: 1 }).where(eq(gpuSlots.nodeId, 'gone1'));
    const held = await del('gone1');
    expect(held.statusCode).toBe(409);
    expect(held.json().message).toMatch(/^node gone1 still holds 1 attempt\(s\): job-remove001#1; cancel them/);

    await db.update(gpuSlots).set({ ownerJobId: null, ownerAttempt: null }).where(eq(gpuSlots.nodeId, 'gone1'));
    const removed = await del('gone1');
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toEqual({ id: 'gone1', removed: true });
    expect(await getNode(db, 'gone1')).toBeUndefined();
    expect(await db.select().from(gpuSlots).where(eq(gpuSlots.nodeId, 'gone1'))).toEqual([]);
    expect((await handle.describe()).status.name).toBe('TERMINATED');
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/nodes', headers: { authorization: `Bearer ${admin}` } });
    expect(list.json().nodes.map((n: { id: string }) => n.id)).not.toContain('gone1');
    // A node with no workflow (never started, or already ended) is removed too; then it is unknown.
    await upsertNodeOnline(db, { nodeId: 'gone2', hostname: 'h', labels: {}, gpus: gpus(1) });
    await setNodeOffline(db, 'gone2');
    expect((await del('gone2')).statusCode).toBe(200);
    expect((await del('gone2')).statusCode).toBe(404);
  });
});
