import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_MEMORY_LIMIT } from '../activities/gpu-host/cgroup.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const skip = jobUsersSkipReason('only root may make cgroups, so no memory limit can be written');

const LIMITED = 'memory-cg';
const UNLIMITED = 'memory-nocg';
/** Allocates 300 MiB and touches every page (a bytes of 'x', not lazily zeroed memory), then exits 0. */
const HOG = ['python3', '-c', "b = b'x' * (300 * 1024 * 1024); print(len(b))"];

/**
 * Issue 39, item 3: a job's memory_mb is written into its attempt's cgroup (cgroup2's memory.max,
 * or the v1 memory hierarchy's limit on a hybrid host), and an attempt the OOM killer ends under
 * it is FAILED with a reason that says so. A node without a memory controller (here: an agent
 * with GPUPLANE_CGROUPS=off) says at start that it enforces no limit, and runs such a job all the same.
 */
describe.skipIf(skip !== null)("a job's memory limit", () => {
  let c: Cluster;
  const tag = randomBytes(4).toString('hex');
  const dirs: string[] = [];
  const workDir = (name: string) => {
    const d = `/tmp/gpuplane-memory-${tag}-${name}`;
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    // uids of their own, apart from the other files' agents and gpuctl up's pool (3000000 up).
    c = await startCluster('memory-limit', {
      agents: [
        { nodeId: LIMITED, gpus: 1, labels: { cgroups: 'on' }, env: { GPUPLANE_JOB_USERS: '3600000-3600049' } },
        { nodeId: UNLIMITED, gpus: 1, labels: { cgroups: 'off' }, env: { GPUPLANE_JOB_USERS: '3600050-3600099', GPUPLANE_CGROUPS: 'off' } },
      ],
    });
  });
  afterAll(async () => {
    await c?.stop();
    if (skip) return;
    // The agents detached (their default on-stop): their guards stay for successors; none come.
    for (const n of [LIMITED, UNLIMITED]) spawnSync('nft', ['delete', 'table', 'inet', `gpuplane_${n.replace(/-/g, '_')}`], { stdio: 'ignore' });
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  /** The agent's start line, or a skip where this machine gives it no memory controller. */
  function limitedOrSkip(ctx: { skip: () => void }): void {
    const line = c.agents.get(LIMITED)!.output.split('\n').find((l) => l.includes(`agent ${LIMITED}:`)) ?? '';
    if (line.includes(NO_MEMORY_LIMIT)) {
      console.log(`skipped: this machine has no memory controller the agent can use (cgroup2 nor v1): ${line}`);
      ctx.skip();
    }
  }

  it('says at start whether attempts get the memory limit their job asks for', () => {
    expect(c.agents.get(UNLIMITED)!.output).toContain(`attempts in process groups (no cgroups: GPUPLANE_CGROUPS=off), an ended attempt's leftovers killed by session, process group and job user, ${NO_MEMORY_LIMIT}`);
    expect(c.agents.get(LIMITED)!.output).toMatch(/memory\.max as each job asks \(memory_mb\)|memory limit as each job asks \(memory_mb; v1 memory hierarchy, |no memory limit \(a job's memory_mb is not enforced on this node\)/);
  });

  it('ends a job that allocates past its memory_mb FAILED, out of memory under its limit', async (ctx) => {
    limitedOrSkip(ctx);
    const job = await c.client.submit({ type: 'CUSTOM', project: 'memory', gpus: 1, memory_mb: 64, selector: { cgroups: 'on' }, working_dir: workDir('hog-64'), command: HOG });
    expect(job.memory_mb).toBe(64);
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('FAILED');
    expect(done.reason).toBe(`out of memory: the job's limit is 64 MiB (memory_mb); exit signal SIGKILL — hint: give it more, e.g. gpuctl retry ${job.id} --memory 128M`);
  });

  it('runs the same job without memory_mb to the end', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', project: 'memory', gpus: 1, selector: { cgroups: 'on' }, working_dir: workDir('hog-free'), command: HOG });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
  });

  it('runs it with its memory_mb on a node without a memory controller, unlimited, as its agent said', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', project: 'memory', gpus: 1, memory_mb: 64, selector: { cgroups: 'off' }, working_dir: workDir('hog-nocg'), command: HOG });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
  });
});
