import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const skip = jobUsersSkipReason("jobs run as the agent's own user, and only the session and group can be swept");

const CG = 'orphans-cg';
const NOCG = 'orphans-nocg';
/** Small enough that 200 sleeps run into it. */
const MAX_PIDS = 50;
/**
 * How long an orphan may take to die after its attempt is SUCCEEDED: the agent kills it before
 * it reports the exit, but the kernel delivers SIGKILL asynchronously: a moment, never seconds.
 */
const DEATH_WINDOW_MS = 3000;

/** A job that leaves a `setsid` child (its pid in orphan.pid) and exits 0, or waits for `release` first. */
const orphanJob = (wait: boolean) =>
  `setsid sh -c 'echo $$ > orphan.pid; exec sleep 300' & while [ ! -s orphan.pid ]; do sleep 0.05; done; ${wait ? 'while [ ! -e release ]; do sleep 0.1; done; ' : ''}exit 0`;

const readPid = (file: string) => until(`pid in ${file}`, () => (fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8').trim()) || null : null), 20_000);

function killQuietly(pid: number | undefined): void {
  try {
    if (pid) process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * Issue 39, part 3: a job's processes end with it. On an agent running as root with job users, a
 * child that calls `setsid` (leaving the attempt's session and group) is killed when its attempt
 * ends, with cgroups (the attempt's cgroup) and without (its project's uid), while another live
 * attempt of the same project keeps its own; and where a pids controller exists, `--max-pids`
 * bounds what a job may fork.
 */
describe.skipIf(skip !== null)('a job\'s processes end with it', () => {
  let c: Cluster;
  const tag = randomBytes(4).toString('hex');
  const dirs: string[] = [];
  const strays: number[] = [];
  /** A folder that does not exist yet: the job's user makes it (0700). */
  const workDir = (name: string) => {
    const d = `/tmp/gpuplane-orphans-${tag}-${name}`;
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    // Each agent its own uids, apart from the default pool (3000000-): another file's agent on
    // this machine (tenancy.e2e) gives its projects those, and a sweep here must not meet them.
    c = await startCluster('orphans', {
      agents: [
        { nodeId: CG, gpus: 2, labels: { cgroups: 'on' }, env: { GPUPLANE_JOB_USERS: '3400000-3400049', GPUPLANE_MAX_PIDS: String(MAX_PIDS) } },
        { nodeId: NOCG, gpus: 2, labels: { cgroups: 'off' }, env: { GPUPLANE_JOB_USERS: '3400050-3400099', GPUPLANE_CGROUPS: 'off' } },
      ],
    });
  });
  afterAll(async () => {
    await c?.stop();
    for (const pid of strays) killQuietly(pid);
    if (skip) return;
    // The agents detached (their default on-stop): their guards stay for successors; none come.
    for (const n of [CG, NOCG]) spawnSync('nft', ['delete', 'table', 'inet', `gpuplane_${n.replace(/-/g, '_')}`], { stdio: 'ignore' });
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('says at start how it contains attempts', () => {
    expect(c.agents.get(NOCG)!.output).toContain("attempts in process groups (no cgroups: GPUPLANE_CGROUPS=off), an ended attempt's leftovers killed by session, process group and job user");
    expect(c.agents.get(CG)!.output).toMatch(/attempts in (cgroups under|process groups \(no cgroup2 boundary\))/);
  });

  it.each([
    ['without cgroups', 'off'],
    ['with cgroups where the agent can make them', 'on'],
  ])('kills a setsid orphan of a SUCCEEDED attempt within seconds, %s', async (_what, cgroups) => {
    const dir = workDir(`single-${cgroups}`);
    const job = await c.client.submit({ type: 'CUSTOM', project: 'orphans', gpus: 1, selector: { cgroups }, working_dir: dir, command: orphanJob(false) });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    const orphan = await readPid(path.join(dir, 'orphan.pid'));
    strays.push(orphan);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    // It had left the attempt's session and group: only its uid (or cgroup) still ties it to the job.
    expect(fs.statSync(path.join(dir, 'orphan.pid')).uid).toBeGreaterThanOrEqual(3_001_000);
    await until('the setsid orphan to die', () => !pidAlive(orphan) || isZombie(orphan), DEATH_WINDOW_MS, 20);
  });

  it.each([['off'], ['on']])('keeps the setsid child of another live attempt of the same project (cgroups %s)', async (cgroups) => {
    const [dirB, dirA] = [workDir(`keeper-${cgroups}`), workDir(`leaver-${cgroups}`)];
    const b = await c.client.submit({ type: 'CUSTOM', project: 'orphans', gpus: 1, selector: { cgroups }, working_dir: dirB, command: orphanJob(true) });
    const orphanB = await readPid(path.join(dirB, 'orphan.pid'));
    strays.push(orphanB);
    const a = await c.client.submit({ type: 'CUSTOM', project: 'orphans', gpus: 1, selector: { cgroups }, working_dir: dirA, command: orphanJob(false) });
    const doneA = await c.client.waitFor(a.id, undefined, 60_000);
    const orphanA = await readPid(path.join(dirA, 'orphan.pid'));
    strays.push(orphanA);
    expect(doneA.state, doneA.reason ?? '').toBe('SUCCEEDED');
    // One user for both: the sweep told them apart by attempt, not by uid.
    expect(fs.statSync(path.join(dirA, 'orphan.pid')).uid).toBe(fs.statSync(path.join(dirB, 'orphan.pid')).uid);
    await until("A's setsid orphan to die", () => !pidAlive(orphanA) || isZombie(orphanA), DEATH_WINDOW_MS, 20);
    // A's sweep ran before A was SUCCEEDED: B's child lived through it, and B still runs.
    expect(pidAlive(orphanB) && !isZombie(orphanB)).toBe(true);
    expect((await c.client.job(b.id)).state).toBe('RUNNING');
    fs.writeFileSync(path.join(dirB, 'release'), '');
    const doneB = await c.client.waitFor(b.id, undefined, 60_000);
    expect(doneB.state, doneB.reason ?? '').toBe('SUCCEEDED');
    await until("B's setsid orphan to die with B", () => !pidAlive(orphanB) || isZombie(orphanB), DEATH_WINDOW_MS, 20);
  });

  it(`stops a job from forking past --max-pids (${MAX_PIDS}) where the node has a pids controller`, async (ctx) => {
    const line = c.agents.get(CG)!.output;
    if (!line.includes(`pids.max ${MAX_PIDS}`)) {
      console.log(`skipped: this machine has no pids controller the agent can use (cgroup2 nor v1): ${line.split('\n').find((l) => l.includes(`agent ${CG}:`))}`);
      ctx.skip();
    }
    const dir = workDir('forks');
    // 200 sleeps, counting those that started; then it exits, and they die with it.
    const fork = `import subprocess\nn = 0\nkids = []\nfor _ in range(200):\n    try:\n        kids.append(subprocess.Popen(["sleep", "300"]).pid)\n        n += 1\n    except OSError:\n        pass\nopen("forked", "w").write(f"{n} {' '.join(map(str, kids))}")\n`;
    const job = await c.client.submit({ type: 'CUSTOM', project: 'orphans', gpus: 1, selector: { cgroups: 'on' }, working_dir: dir, command: ['python3', '-c', fork] });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    const [n, ...kids] = fs.readFileSync(path.join(dir, 'forked'), 'utf8').trim().split(' ').map(Number);
    strays.push(...kids);
    // The job's own process counts too: fewer than the limit started, and not far fewer.
    expect(n).toBeLessThan(MAX_PIDS);
    expect(n).toBeGreaterThan(MAX_PIDS - 10);
    await until('the sleeps to die with their job', () => kids.every((k) => !pidAlive(k) || isZombie(k)), DEATH_WINDOW_MS, 20);
  });

  it('refuses to start, in one line, with GPUPLANE_REQUIRE_CGROUPS=1 where it cannot contain attempts', () => {
    const r = spawnSync(process.execPath, [gpuctlPath, 'agent', '--node-id', 'orphans-required', '--no-token'], {
      env: { ...c.env, GPUPLANE_CGROUPS: 'off', GPUPLANE_REQUIRE_CGROUPS: '1', GPUPLANE_JOB_USERS: 'agent' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(/GPUPLANE_REQUIRE_CGROUPS=1, and this agent cannot contain its attempts: GPUPLANE_CGROUPS=off$/);
    expect(r.stdout).not.toContain('agent orphans-required:');
  });
});

/** A killed process whose parent has not reaped it yet is dead all the same. */
function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}
