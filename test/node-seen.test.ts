import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { getNode, setNodeOffline, upsertNodeOnline } from '../db/queries/nodes.ts';
import { refreshNodesSeen } from '../temporal/node-seen.ts';

/** An ONLINE node's last_seen_at follows its lease's heartbeats, one write a node per step at most. */
describe("nodes' last_seen_at", () => {
  let h: DatabaseHandle;
  beforeAll(async () => {
    h = await openDatabase({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-seen-')) });
    for (const id of ['n-on', 'n-off']) await upsertNodeOnline(h.db, { nodeId: id, hostname: id, labels: {}, gpus: [] });
    await setNodeOffline(h.db, 'n-off');
    await h.db.execute(sql`update nodes set last_seen_at = now() - interval '4 minutes'`);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('advances for an ONLINE node as its lease beats, at most once a step, and not for an OFFLINE one', async () => {
    const before = (await getNode(h.db, 'n-on'))!.lastSeenAt;
    const beat = new Date();
    const asked: string[] = [];
    const heartbeatOf = async (id: string) => (asked.push(id), beat);
    expect(await refreshNodesSeen(h.db, heartbeatOf, 30_000)).toEqual(['n-on']);
    expect(asked).toEqual(['n-on']);
    const after = (await getNode(h.db, 'n-on'))!.lastSeenAt;
    expect(after.getTime()).toBe(beat.getTime());
    expect(after.getTime()).toBeGreaterThan(before.getTime() + 200_000);
    // 5 s later: within the step, no write.
    expect(await refreshNodesSeen(h.db, async () => new Date(beat.getTime() + 5_000), 30_000)).toEqual([]);
    expect(await refreshNodesSeen(h.db, async () => new Date(beat.getTime() + 31_000), 30_000)).toEqual(['n-on']);
    // A node whose workflow cannot be described keeps its time.
    expect(await refreshNodesSeen(h.db, async () => Promise.reject(new Error('unavailable')), 30_000)).toEqual([]);
    expect((await getNode(h.db, 'n-off'))!.lastSeenAt.getTime()).toBeLessThan(before.getTime() + 1_000);
  });
});
