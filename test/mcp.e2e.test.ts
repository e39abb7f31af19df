/**
 * `gpuctl mcp` (cli/mcp.ts) driven by the official MCP client (@modelcontextprotocol/sdk) over
 * stdio, against a real cluster: what a coding assistant does to diagnose a failed job and retry
 * it, and a viewer's token refused as a tool error, not a crash.
 */
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { checkpoints } from '../db/schema.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';

type ToolResult = { isError?: boolean; content: { type: string; text: string }[] };

describe('gpuctl mcp, through the MCP SDK client', () => {
  let c: Cluster;
  const sessions: Client[] = [];

  /** A client session of `gpuctl mcp` run with this token. */
  async function connect(token: string): Promise<Client> {
    const env = Object.fromEntries(Object.entries({ ...c.env, GPUPLANE_TOKEN: token }).filter((e): e is [string, string] => e[1] !== undefined));
    const transport = new StdioClientTransport({ command: process.execPath, args: [gpuctlPath, 'mcp'], env, stderr: 'pipe' });
    const client = new Client({ name: 'gpuplane-test', version: '1.0.0' });
    await client.connect(transport);
    sessions.push(client);
    return client;
  }
  const call = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as ToolResult;
  const json = <T>(r: ToolResult): T => {
    expect(r.isError, r.content[0]?.text).toBeFalsy();
    return JSON.parse(r.content[0].text) as T;
  };

  beforeAll(async () => {
    c = await startCluster('mcp', { agents: [{ nodeId: 'mcp-node', gpus: 1 }] });
  });
  afterAll(async () => {
    for (const s of sessions) await s.close().catch(() => undefined);
    await c?.stop();
  });

  it('lists its tools; submits a job, reads why it failed, retries it with an edited command; finds the best checkpoint', async () => {
    const mcp = await connect(c.token);
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'cancel_job',
        'cancel_sweep',
        'create_sweep',
        'evaluate_checkpoint',
        'fork_checkpoint',
        'get_best_checkpoint',
        'get_job',
        'get_lineage',
        'get_logs',
        'get_metrics',
        'get_sweep',
        'list_checkpoints',
        'list_jobs',
        'list_nodes',
        'list_runs',
        'list_sweeps',
        'retry_job',
        'submit_job',
      ].sort(),
    );
    // The API's own schema: the submit tool says what a job takes.
    const submit = tools.find((t) => t.name === 'submit_job')!;
    expect(Object.keys(submit.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['command', 'gpus', 'type', 'project']));

    const body = { type: 'CUSTOM', gpus: 0, working_dir: c.work, command: ['sh', '-c', 'echo "cannot open data.csv" >&2; exit 3'], idempotency_key: 'mcp-submit-1' };
    const job = json<{ id: string }>(await call(mcp, 'submit_job', body));
    // The call retried with its key: the same job, not a second one.
    expect(json<{ id: string }>(await call(mcp, 'submit_job', body)).id).toBe(job.id);
    const waitEnd = async () => {
      for (let i = 0; i < 240; i++) {
        const j = json<{ state: string; attempt: number }>(await call(mcp, 'get_job', { id: job.id }));
        if (['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(j.state)) return j;
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error('the job did not end');
    };
    expect((await waitEnd()).state).toBe('FAILED');
    const logs = await call(mcp, 'get_logs', { id: job.id });
    expect(logs.content[0].text).toContain('cannot open data.csv');
    json(await call(mcp, 'retry_job', { id: job.id, command: ['sh', '-c', 'echo fixed'] }));
    const again = await waitEnd();
    expect(again).toMatchObject({ state: 'SUCCEEDED', attempt: 2 });
    expect(json<{ id: string }[]>(await call(mcp, 'list_jobs', { limit: 5 })).map((j) => j.id)).toContain(job.id);
    expect(json<{ id: string }[]>(await call(mcp, 'list_nodes', {})).map((n) => n.id)).toEqual(['mcp-node']);

    // A run with two checkpoints and the eval/loss (the default primary metric) it had logged at
    // their steps when they were registered, none evaluated yet: the best is the lower loss.
    const train = json<{ id: string }>(await call(mcp, 'submit_job', { type: 'TRAIN', gpus: 0, project: 'mcp', working_dir: c.work, command: ['true'] }));
    for (let i = 0; i < 240 && json<{ state: string }>(await call(mcp, 'get_job', { id: train.id })).state !== 'SUCCEEDED'; i++) await new Promise((r) => setTimeout(r, 250));
    const [run] = json<{ id: string }[]>(await call(mcp, 'list_runs', { job: train.id }));
    await c.client.request('POST', `/runs/${run.id}/metrics`, { points: [10, 20].map((step) => ({ key: 'eval/loss', step, value: step === 10 ? 0.2 : 0.5 })) });
    const h = await openDatabase({ url: c.dbUrl, poolSize: 1 });
    const ids = [newId('ckpt'), newId('ckpt')];
    try {
      for (const [i, step] of [10, 20].entries()) {
        await h.db.insert(checkpoints).values({ id: ids[i], runId: run.id, jobId: train.id, attempt: 1, nodeId: 'mcp-node', uri: path.join(c.work, `step_${step}.ckpt`), fingerprint: `sha256:0${i}`, sizeBytes: 1, step, trainMetrics: { 'eval/loss': step === 10 ? 0.2 : 0.5 } });
      }
    } finally {
      await h.close();
    }
    const best = json<Record<string, unknown>>(await call(mcp, 'get_best_checkpoint', { run: run.id }));
    expect(JSON.stringify(best)).toContain(ids[0]);
    expect(json<{ checkpoints: unknown[] }>(await call(mcp, 'list_checkpoints', { run: run.id })).checkpoints).toHaveLength(2);
    const metrics = json<{ series: { key: string }[] }>(await call(mcp, 'get_metrics', { run_id: run.id }));
    expect(metrics.series.map((s) => s.key)).toEqual(['eval/loss']);

    // Fork the best checkpoint with an edited command; a call retried with the same key makes no second job.
    const fork = { checkpoint_id: ids[0], command: ['sh', '-c', 'echo resumed from "$GPUPLANE_RESUME_FROM"'], idempotency_key: 'mcp-fork-1' };
    const forked = json<{ id: string; forked_from: { checkpoint_id: string; run_id: string } }>(await call(mcp, 'fork_checkpoint', fork));
    expect(forked.forked_from).toMatchObject({ checkpoint_id: ids[0], run_id: run.id });
    expect(json<{ id: string }>(await call(mcp, 'fork_checkpoint', fork)).id).toBe(forked.id);
    for (let i = 0; i < 240 && json<{ state: string }>(await call(mcp, 'get_job', { id: forked.id })).state !== 'SUCCEEDED'; i++) await new Promise((r) => setTimeout(r, 250));
    expect((await call(mcp, 'get_logs', { id: forked.id })).content[0].text).toContain(`resumed from ${path.join(c.work, 'step_10.ckpt')}`);
    const tree = json<{ root_run_id: string; runs: { id: string; job_id: string | null; depth: number }[] }>(await call(mcp, 'get_lineage', { checkpoint: ids[0] }));
    expect(tree.root_run_id).toBe(run.id);
    expect(tree.runs.map((r) => [r.job_id, r.depth])).toEqual([
      [train.id, 0],
      [forked.id, 1],
    ]);
  }, 120_000);

  it('creates a sweep once under a retried key, lists it, reads its trials and cancels it', async () => {
    const mcp = await connect(c.token);
    const spec = {
      project: 'mcp-sweep',
      command: ['sh', '-c', 'sleep 60'],
      workdir: c.work,
      gpus: 0,
      method: 'grid',
      max_concurrent: 1,
      parameters: { lr: { values: [0.1, 0.01, 0.001] } },
      idempotency_key: 'mcp-sweep-1',
    };
    const sweep = json<{ id: string; trials: { total: number } }>(await call(mcp, 'create_sweep', spec));
    expect(sweep.trials.total).toBe(3);
    expect(json<{ id: string }>(await call(mcp, 'create_sweep', spec)).id).toBe(sweep.id);
    expect(json<{ id: string }[]>(await call(mcp, 'list_sweeps', { project: 'mcp-sweep' })).map((x) => x.id)).toEqual([sweep.id]);
    // One trial at a time: the first runs, the others wait for it.
    let started = 0;
    for (let i = 0; i < 240 && started === 0; i++) {
      started = json<{ trials: { started: number } }>(await call(mcp, 'get_sweep', { id: sweep.id })).trials.started;
      if (started === 0) await new Promise((r) => setTimeout(r, 250));
    }
    expect(started).toBe(1);
    json(await call(mcp, 'cancel_sweep', { id: sweep.id, reason: 'enough' }));
    let state = '';
    for (let i = 0; i < 240 && state !== 'CANCELLED'; i++) {
      state = json<{ state: string }>(await call(mcp, 'get_sweep', { id: sweep.id })).state;
      if (state !== 'CANCELLED') await new Promise((r) => setTimeout(r, 250));
    }
    expect(state).toBe('CANCELLED');
    expect(json<{ trials: { started: number } }>(await call(mcp, 'get_sweep', { id: sweep.id })).trials.started).toBe(1);
    // A bad file is the API's 400, as a tool error.
    const bad = await call(mcp, 'create_sweep', { ...spec, method: 'bayes', idempotency_key: 'mcp-sweep-2' });
    expect(bad.isError).toBe(true);
    expect(bad.content[0].text).toMatch(/method|HTTP 400/);
  }, 120_000);

  it("a viewer's submit_job is an error result naming the refusal, and the session goes on", async () => {
    const viewer = await c.makeToken({ role: 'viewer', projects: ['mcp'] });
    const mcp = await connect(viewer.token);
    const r = await call(mcp, 'submit_job', { type: 'CUSTOM', gpus: 0, project: 'mcp', command: ['true'] });
    expect(r.isError).toBe(true);
    expect(r.content[0].text).toMatch(/may only read.*\(HTTP 403\)/);
    expect((await call(mcp, 'list_nodes', {})).isError).toBeFalsy();
    const unknown = await call(mcp, 'no_such_tool', {});
    expect(unknown.isError).toBe(true);
  }, 60_000);
});
