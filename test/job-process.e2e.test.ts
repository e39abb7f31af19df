import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TERMINAL } from '../cli/client.ts';
import { BASE_ENV } from '../domain/job-env.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { parseEnv } from './support/env.ts';

const NODE = 'proc-node';
/** Every job but the fallback one runs on the first agent (the second has cgroups off). */
const ON_NODE = { cgroups: 'on' };

/** Running, as opposed to gone or a zombie: an orphan's zombie lingers until init reaps it. */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2)[0]);
  } catch {
    return false;
  }
}

function processGroup(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

const readPid = (file: string) => until(`pid in ${file}`, () => (fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8').trim()) || null : null), 10_000);

/**
 * How long a leftover may take to die after its job is SUCCEEDED. The agent sends SIGKILL to
 * the attempt's group before it reports the exit (so before SUCCEEDED is written), but the
 * kernel delivers it asynchronously and the orphan's zombie waits for init to reap it: a
 * moment, never seconds.
 */
const DEATH_WINDOW_MS = 2000;

describe('what a job process sees and leaves behind', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('jobproc', {
      agents: [
        { nodeId: NODE, gpus: 2, labels: { cgroups: 'on' }, env: { MY_SERVICE_TOKEN: 'sekrit', HF_HOME: '/x' } },
        { nodeId: `${NODE}-nocg`, gpus: 1, labels: { cgroups: 'off' }, env: { GPUPLANE_CGROUPS: 'off' } },
      ],
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  const scratch = (name: string) => {
    const d = path.join(c.work, name);
    fs.mkdirSync(d);
    return d;
  };

  it("gets a documented environment, not the agent's", async () => {
    const dir = scratch('env');
    const own = { WANDB_API_KEY: 'job-own-key', MY_SETTING: 'on' };
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: ON_NODE, env: own, params: { lr: 0.1 }, command: `env -0 > ${dir}/env` });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('SUCCEEDED');
    const env = parseEnv(fs.readFileSync(path.join(dir, 'env'), 'utf8'));

    // The agent process runs with all of these (read from its /proc environ); none reaches the job.
    const agentEnv = parseEnv(fs.readFileSync(`/proc/${c.agents.get(NODE)!.pid}/environ`, 'utf8'));
    for (const name of ['DATABASE_URL', 'MY_SERVICE_TOKEN', 'HF_HOME', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'GPUPLANE_HOME', 'GPUPLANE_WORKFLOW_BUNDLE', 'GPUPLANE_LOST_AFTER_S', 'GPUPLANE_KILL_GRACE_S', 'GPUPLANE_API_PORT']) {
      expect(agentEnv, name).toHaveProperty(name);
      expect(env, name).not.toHaveProperty(name);
    }
    expect(env.PATH).toBe(c.env.PATH);
    expect(env.HOME).toBe(c.env.HOME);
    // The filter is for the agent's environment: the job's own entries pass, secret-looking or not.
    expect(env).toMatchObject(own);
    expect(env).toMatchObject({
      GPUPLANE_JOB_ID: job.id,
      GPUPLANE_ATTEMPT: '1',
      GPUPLANE_NODE_ID: NODE,
      GPUPLANE_API_URL: c.apiUrl,
      GPUPLANE_PARAMS: JSON.stringify({ lr: 0.1 }),
      CUDA_VISIBLE_DEVICES: j.gpu_indices!.join(','),
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
    });
    // Nothing else: the base, the job's own, what GPUPlane sets, and what /bin/sh itself exports.
    const gpuplane = ['GPUPLANE_JOB_ID', 'GPUPLANE_ATTEMPT', 'GPUPLANE_NODE_ID', 'GPUPLANE_API_URL', 'GPUPLANE_PARAMS', 'GPUPLANE_RUN_ID', 'CUDA_VISIBLE_DEVICES', 'CUDA_DEVICE_ORDER'];
    const allowed = new Set<string>([...BASE_ENV, ...Object.keys(own), ...gpuplane, 'PWD', 'OLDPWD', 'SHLVL', '_']);
    expect(Object.keys(env).filter((k) => !allowed.has(k) && !k.startsWith('LC_'))).toEqual([]);
  });

  it('kills what the main process left running in its group before the job is SUCCEEDED', async () => {
    const dir = scratch('leftover');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: ON_NODE, working_dir: dir, command: 'sleep 300 & echo $! > child.pid; exit 0' });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    const child = await readPid(path.join(dir, 'child.pid'));
    try {
      expect(j.state).toBe('SUCCEEDED');
      await until('the leftover child to die', () => !running(child), DEATH_WINDOW_MS, 20);
    } finally {
      killQuietly(child);
    }
  });

  const SETSID_JOB = `sleep 300 & echo $! > child.pid; setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' & while [ ! -s escaped.pid ]; do sleep 0.05; done; exit 0`;

  it('contains a child that left the group with setsid in the attempt\'s cgroup, where the agent can make one', async () => {
    // As root with a cgroup2 mount the agent gives each attempt a cgroup of its own; what the
    // job starts stays in it whatever it does, and cgroup.kill ends it with the attempt.
    const agent = c.agents.get(NODE)!;
    const contained = agent.output.includes('attempts in cgroups under');
    expect(contained, agent.output).toBe(process.getuid?.() === 0 && fs.readFileSync('/proc/self/mountinfo', 'utf8').includes(' - cgroup2 '));
    if (!contained) return;
    const dir = scratch('setsid-cgroup');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, working_dir: dir, selector: ON_NODE, command: SETSID_JOB });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    const child = await readPid(path.join(dir, 'child.pid'));
    const escaped = await readPid(path.join(dir, 'escaped.pid'));
    try {
      expect(j.state).toBe('SUCCEEDED');
      expect(processGroup(escaped)).not.toBe(j.attempts[0].pid);
      await until('the in-group child to die', () => !running(child), DEATH_WINDOW_MS, 20);
      await until('the setsid child to die too', () => !running(escaped), DEATH_WINDOW_MS, 20);
    } finally {
      killQuietly(child);
      killQuietly(escaped);
    }
  });

  it('cannot reach a child that left the group with setsid without cgroups (GPUPLANE_CGROUPS=off: the documented fallback)', async () => {
    // The agent kills the attempt's process group; a child that calls setsid starts a session
    // and group of its own, so without a cgroup it survives its job. The in-group child is the
    // witness that the group kill has happened by the time the escaped one is looked at.
    const dir = scratch('setsid');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, working_dir: dir, selector: { cgroups: 'off' }, command: SETSID_JOB });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    const child = await readPid(path.join(dir, 'child.pid'));
    const escaped = await readPid(path.join(dir, 'escaped.pid'));
    try {
      expect(j.state).toBe('SUCCEEDED');
      expect(j.node_id).toBe(`${NODE}-nocg`);
      await until('the in-group child to die', () => !running(child), DEATH_WINDOW_MS, 20);
      expect(running(escaped)).toBe(true);
      expect(processGroup(escaped)).not.toBe(j.attempts[0].pid);
    } finally {
      killQuietly(child);
      killQuietly(escaped);
    }
  });

  it("keeps shim state per attempt: a retry's outcome is its own, not attempt 1's", async () => {
    const dir = scratch('retry');
    // Attempt 1 exits 3, attempt 2 exits 0. Were the state files keyed by job only, attempt 2
    // would find attempt 1's status file and end FAILED with code 3 without running.
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: ON_NODE, working_dir: dir, command: 'echo "$GPUPLANE_ATTEMPT" >> ran; [ "$GPUPLANE_ATTEMPT" = 2 ] || exit 3' });
    const first = await c.client.waitFor(job.id, undefined, 30_000);
    expect(first).toMatchObject({ state: 'FAILED', attempt: 1, exit_code: 3 });
    await c.client.retry(job.id);
    const second = await until('attempt 2 to end', async () => {
      const j = await c.client.job(job.id);
      return j.attempt === 2 && TERMINAL.includes(j.state) ? j : null;
    });
    expect(second).toMatchObject({ state: 'SUCCEEDED', attempt: 2, exit_code: 0 });
    expect(fs.readFileSync(path.join(dir, 'ran'), 'utf8')).toBe('1\n2\n');

    const runDir = path.join(c.home, 'agent', NODE, 'run');
    const mine = fs.readdirSync(runDir).filter((f) => f.startsWith(`${job.id}.`));
    expect(mine.filter((f) => !/^[^.]+\.\d+\.(json|adopt|status|fenced)$/.test(f))).toEqual([]);
    expect(mine).toEqual(expect.arrayContaining([`${job.id}.1.json`, `${job.id}.1.status`, `${job.id}.2.json`, `${job.id}.2.status`]));
    expect(fs.readFileSync(path.join(runDir, `${job.id}.1.status`), 'utf8').trim()).toBe('3');
    expect(fs.readFileSync(path.join(runDir, `${job.id}.2.status`), 'utf8').trim()).toBe('0');
  });

  it('never loses the exit status of a job that exits at once: 20 `true` jobs on 2 cards', async () => {
    const jobs = await Promise.all(Array.from({ length: 20 }, () => c.client.submit({ type: 'CUSTOM', gpus: 1, selector: ON_NODE, command: ['true'] })));
    const done = await Promise.all(jobs.map((j) => c.client.waitFor(j.id, undefined, 120_000)));
    for (const j of done) {
      expect({ id: j.id, state: j.state, attempt: j.attempt, exit: j.exit_code, attempts: j.attempts.length }).toEqual({ id: j.id, state: 'SUCCEEDED', attempt: 1, exit: 0, attempts: 1 });
      expect(j.history.map((h) => h.to)).toEqual(['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED']);
    }
  });

  it("sets CUDA_VISIBLE_DEVICES to the cards the database gave each of two concurrent jobs", async () => {
    const dir = scratch('cards');
    // Each job writes its cards, then waits for the other's: both ran at once, on different cards.
    const command = `echo "$CUDA_VISIBLE_DEVICES" > "$GPUPLANE_JOB_ID"; i=0; while [ "$(ls | wc -l)" -lt 2 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ "$(ls | wc -l)" -ge 2 ]`;
    const jobs = await Promise.all([0, 1].map(() => c.client.submit({ type: 'CUSTOM', gpus: 1, selector: ON_NODE, working_dir: dir, command })));
    const done = await Promise.all(jobs.map((j) => c.client.waitFor(j.id, undefined, 60_000)));
    for (const j of done) {
      expect(j.state).toBe('SUCCEEDED');
      expect(j.gpu_indices).toHaveLength(1);
      expect(fs.readFileSync(path.join(dir, j.id), 'utf8').trim()).toBe(j.gpu_indices!.join(','));
      expect(j.attempts[0].gpu_indices).toEqual(j.gpu_indices);
    }
    expect(done.flatMap((j) => j.gpu_indices!).sort()).toEqual([0, 1]);
  });
});
