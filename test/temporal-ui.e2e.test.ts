import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporalBinary } from '../temporal/dev-server.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';

/**
 * Invariant 8: what people do to a workflow in the Temporal Web UI (or the `temporal` CLI,
 * which makes the same calls) converges: the job ends with a reason that names it, its process
 * is gone, its cards are free, and the scheduler and node workflows come back by themselves.
 */
describe('Temporal UI actions on GPUPlane workflows', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('tui', { agents: [{ nodeId: 'u1', gpus: 2 }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  const temporal = (...args: string[]) =>
    execFileSync(temporalBinary(), [...args, '--address', c.env.TEMPORAL_ADDRESS!, '--namespace', c.namespace], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  /** A running job whose shell writes its pid; returns the job id and the pid. */
  async function runningJob(name: string): Promise<{ id: string; pid: number }> {
    const pidFile = path.join(c.work, `${name}.pid`);
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `echo $$ > ${pidFile}; sleep 120` });
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const pid = Number(await until(`${name} pid`, () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim()));
    return { id: job.id, pid };
  }

  async function cardsFree() {
    await until('cards free', async () => (await c.client.nodes()).flatMap((n) => n.gpus).every((g) => !g.owner_job_id), 30_000);
  }

  it('Terminate on a running job: FAILED with the reason, process killed, cards freed', async () => {
    const { id, pid } = await runningJob('terminate');
    temporal('workflow', 'terminate', '--workflow-id', `job/${id}`, '--reason', 'stuck, says the on-call');
    const done = await c.client.waitFor(id, undefined, 30_000);
    expect(done.state).toBe('FAILED');
    expect(done.reason).toContain('workflow terminated in Temporal');
    expect(done.reason).toContain('stuck, says the on-call');
    await until('process gone', () => !pidAlive(pid), 15_000);
    await cardsFree();
  });

  it('Cancel on a running job: CANCELLED, process killed, cards freed', async () => {
    const { id, pid } = await runningJob('cancel');
    temporal('workflow', 'cancel', '--workflow-id', `job/${id}`);
    const done = await c.client.waitFor(id, undefined, 30_000);
    expect(done.state).toBe('CANCELLED');
    expect(done.reason).toContain('cancelled in Temporal');
    await until('process gone', () => !pidAlive(pid), 15_000);
    await cardsFree();
  });

  it('Reset of a running job to its first workflow task: the new run watches the same process, which finishes', async () => {
    const marker = path.join(c.work, 'reset.done');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `sleep 5; touch ${marker}` });
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    temporal('workflow', 'reset', '--workflow-id', `job/${job.id}`, '--type', 'FirstWorkflowTask', '--reason', 'try the reset button');
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts.map((a) => a.state)).toEqual(['SUCCEEDED']);
    expect(fs.existsSync(marker)).toBe(true);
    expect(done.history.some((h) => h.detail?.includes('reset'))).toBe(true);
    await cardsFree();
  });

  it('Terminate on the scheduler and on a node workflow: both come back, and jobs still run', async () => {
    temporal('workflow', 'terminate', '--workflow-id', 'scheduler', '--reason', 'ui');
    temporal('workflow', 'terminate', '--workflow-id', 'node/u1', '--reason', 'ui');
    await until('scheduler back', () => /RUNNING/.test(temporal('workflow', 'describe', '--workflow-id', 'scheduler', '-o', 'json')), 30_000);
    await until('node workflow back', () => /RUNNING/.test(temporal('workflow', 'describe', '--workflow-id', 'node/u1', '-o', 'json')), 30_000);
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 2, command: 'true' });
    expect((await c.client.waitFor(job.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    expect((await c.client.nodes()).find((n) => n.id === 'u1')!.status).toBe('ONLINE');
  });
});
