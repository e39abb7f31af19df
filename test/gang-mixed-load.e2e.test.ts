import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SubmitJobBody } from '../api/schemas/jobs.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { sampleOwnership, type OwnershipSample } from './support/ownership.ts';
import { until } from './support/poll.ts';
import { overlappingAttempts, recorderScript } from './support/recorder.ts';

/**
 * Gangs and single-node jobs submitted at once onto a small cluster (3 agents × 2 fake cards):
 * the gangs must neither deadlock the queue (a gang holding one node while it waits for the
 * next, another gang holding that one) nor share a card with anyone, which the test samples from
 * the catalogue every 250 ms while they run, as bench/chaos does.
 */
describe('gangs and single-node jobs under load', () => {
  let c: Cluster;
  let db: pg.Client;
  beforeAll(async () => {
    c = await startCluster('gang-mixed', {
      heartbeatTimeoutS: 4,
      agents: [
        { nodeId: 'm1', gpus: 2 },
        { nodeId: 'm2', gpus: 2 },
        { nodeId: 'm3', gpus: 2 },
      ],
    });
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await c?.stop();
  });

  it('8 two-node gangs and 8 single-node jobs all SUCCEED; no card is ever held by two attempts, no job has two live attempts, and every card is free at the end', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'mixed-'));
    const shapes: Partial<SubmitJobBody>[] = Array.from({ length: 8 }, (_, i) => [
      { nodes: 2, gpus_per_node: 1 + (i % 2) },
      { gpus: 1 + ((i >> 1) % 2) },
    ]).flat();
    const jobs = await Promise.all(shapes.map((s) => c.client.submit({ type: 'CUSTOM', ...s, command: recorderScript(dir, 0.5) })));

    const worst: OwnershipSample = { doubleOwned: 0, twoLiveAttempts: 0, ownerMismatch: 0, claimed: 0, owned: 0 };
    let samples = 0;
    let stop = false;
    const sampler = (async () => {
      while (!stop) {
        const s = await sampleOwnership((text) => db.query(text));
        for (const k of Object.keys(worst) as (keyof OwnershipSample)[]) worst[k] = Math.max(worst[k], s[k]);
        samples++;
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    try {
      const done = await Promise.all(jobs.map((j) => c.client.waitFor(j.id, undefined, 45_000)));
      for (const d of done) expect(`${d.id} ${d.state} ${d.reason ?? ''}`).toBe(`${d.id} SUCCEEDED `);
    } finally {
      stop = true;
      await sampler;
    }
    expect(worst.doubleOwned).toBe(0);
    expect(worst.twoLiveAttempts).toBe(0);
    expect(worst.ownerMismatch).toBe(0);
    // The sampler saw the cards in use, more than once, and a gang's claims on both its nodes.
    expect(worst.owned).toBeGreaterThan(0);
    expect(worst.claimed).toBeGreaterThanOrEqual(2);
    expect(samples).toBeGreaterThan(4);
    // Every process of every job ran (two a gang), and no two attempts of a job overlapped.
    expect(fs.readdirSync(dir).length).toBeGreaterThanOrEqual(8 * 2 + 8);
    for (const j of jobs) expect(overlappingAttempts(dir, j.id)).toBe(0);
    await until('every card free', async () => (await sampleOwnership((text) => db.query(text))).owned === 0, 10_000);
    const nodes = await c.client.nodes();
    expect(nodes.flatMap((n) => n.gpus).filter((g) => g.busy)).toEqual([]);
  }, 90_000);
});
