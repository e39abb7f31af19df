import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporalBinary } from '../temporal/dev-server.ts';
import { temporalSecurityFromEnv } from '../temporal/security.ts';
import { startCluster, type Cluster } from './support/cluster.ts';

/**
 * GPUPlane on a real Temporal server (temporal-server v1.27.2 with PostgreSQL persistence and
 * visibility, 4 history shards: temporal/cluster.ts), not the dev server, with mTLS on its
 * frontend: every process (control worker, API, agents) connects with TEMPORAL_TLS_*.
 */
describe('on a real Temporal cluster (PostgreSQL persistence and visibility)', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('realtemporal', {
      realTemporal: { numHistoryShards: 4, tls: true },
      heartbeatTimeoutS: 3,
      lostAfterS: 8,
      retryRetentionS: 30,
      agents: [
        { nodeId: 'rt1', gpus: 1 },
        { nodeId: 'rt2', gpus: 1 },
      ],
    });
  }, 240_000);
  afterAll(async () => {
    await c?.stop();
  });
  const tlsFlags = () => ['--tls-cert-path', c.env.TEMPORAL_TLS_CERT!, '--tls-key-path', c.env.TEMPORAL_TLS_KEY!, '--tls-ca-path', c.env.TEMPORAL_TLS_CA!, '--tls-server-name', c.env.TEMPORAL_TLS_SERVER_NAME!];

  it('refuses a connection without TLS, and one with TLS but no client certificate', async () => {
    const address = c.temporalCluster!.address;
    const attempt = async (opts: object) => {
      try {
        const conn = await Connection.connect({ address, connectTimeout: 3000, ...opts });
        try {
          await conn.withDeadline(Date.now() + 5000, () => conn.workflowService.getSystemInfo({}));
          return 'answered';
        } finally {
          await conn.close();
        }
      } catch {
        return 'refused';
      }
    };
    expect(await attempt({})).toBe('refused');
    expect(await attempt({ tls: { serverRootCACertificate: fs.readFileSync(c.env.TEMPORAL_TLS_CA!), serverNameOverride: c.env.TEMPORAL_TLS_SERVER_NAME } })).toBe('refused');
    expect(await attempt(temporalSecurityFromEnv(c.env))).toBe('answered');
  });

  it('runs a job to SUCCEEDED, and its workflow is listed by our search attributes (SQL visibility)', async () => {
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: 'echo hello' });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.history.filter((h) => h.from !== h.to).map((h) => h.to)).toEqual(['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED']);
    const out = execFileSync(temporalBinary(), ['workflow', 'list', '--query', `GpuplaneJobId = '${job.id}' AND GpuplaneJobState = 'SUCCEEDED'`, '-o', 'json', '--address', c.temporalCluster!.address, '--namespace', c.namespace, ...tlsFlags()], { encoding: 'utf8' });
    expect((JSON.parse(out || '[]') as unknown[]).length).toBe(1);
  });

  it('a SIGKILLed agent: LOST, re-queued onto the other node as attempt 2', async () => {
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: 'sleep 5' });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const victim = running.node_id!;
    await c.agents.get(victim)!.kill('SIGKILL');
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempts.map((a) => [a.attempt, a.state, a.node_id])).toEqual([
      [1, 'LOST', victim],
      [2, 'SUCCEEDED', victim === 'rt1' ? 'rt2' : 'rt1'],
    ]);
    await c.addAgent({ nodeId: victim, gpus: 1 });
  });

  it('retry_job with an edit continues the same workflow as attempt 2', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'exit 3' });
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('FAILED');
    const retried = await c.client.retry(job.id, { command: 'true' });
    expect(retried.attempt).toBe(2);
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempts.map((a) => [a.attempt, a.state])).toEqual([
      [1, 'FAILED'],
      [2, 'SUCCEEDED'],
    ]);
  });
});
