import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { NO_MEMORY_LIMIT } from '../activities/gpu-host/cgroup.ts';
import { prepareTestImage, TEST_IMAGE } from './support/busybox-image.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { gpuctlIn } from './support/gpuctl-cli.ts';
import { jobUsersSkipReason } from './support/job-users.ts';
import { until } from './support/poll.ts';

// Made (or found) before the suite is collected: a machine where podman cannot run containers skips the file, saying why.
const setup = prepareTestImage();
const skip = 'skip' in setup ? setup.skip : null;
if (skip) console.warn(`container-image.e2e skipped: ${skip}`);
const noJobUsers = jobUsersSkipReason('jobs run as users of their own only where the agent is root');

/**
 * Image jobs (issue 45 part 2): `gpuctl submit --image REF` runs the command in an OCI image
 * through the node's podman. The image is a static busybox imported locally (no registry here);
 * a node without podman (GPUPLANE_PODMAN=off) is where an image job cannot go.
 */
describe.skipIf(skip !== null)('jobs in a container image, through the node’s podman', () => {
  let c: Cluster;
  let env: NodeJS.ProcessEnv;
  const runArgs = 'runArgs' in setup ? setup.runArgs.join(' ') : '';
  const podmanAgent = { nodeId: 'ct-a', gpus: 4, env: { GPUPLANE_PODMAN: 'podman', GPUPLANE_PODMAN_RUN_ARGS: runArgs, GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300', GPUPLANE_KILL_GRACE_S: '2' } };

  beforeAll(async () => {
    // Only a node without a runtime at first: an image job waits for one.
    // Lost-after 30 s (the suite's 12 s elsewhere): the restart test's shim waits out the agent's
    // return before it fences itself (lost-after less the fence grace), and a loaded machine
    // once took the agent longer than the 9 s that leaves to come back. Nothing here waits on LOST.
    c = await startCluster('images', { lostAfterS: 30, agents: [{ nodeId: 'ct-none', gpus: 2, env: { GPUPLANE_PODMAN: 'off' } }] });
    env = { ...c.env, GPUPLANE_API_URL: c.apiUrl, GPUPLANE_TOKEN: c.token };
  });
  afterAll(async () => {
    await c?.stop();
  });

  const submit = async (args: string[], type = 'CUSTOM') => {
    const r = await gpuctlIn(env, ['submit', '--type', type, '--image', TEST_IMAGE, ...args]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim().split('\n').pop()!;
  };
  const logOf = async (jobId: string) => (await fetch(`${c.apiUrl}/api/v1/jobs/${jobId}/logs`, { headers: c.auth })).text();
  const logWith = (jobId: string, text: string, ms = 15_000) =>
    until(`${text} in ${jobId}'s log`, async () => {
      const got = await logOf(jobId);
      return got.includes(text) ? got : null;
    }, ms);
  const checkpointsOf = async (jobId: string) => (await c.client.request<{ checkpoints: { id: string; job_id: string | null; uri: string }[] }>('GET', '/checkpoints?project=images')).checkpoints.filter((k) => k.job_id === jobId);
  // Whether a job reaches host:port (busybox nc), said in its log as name=reached or name=refused.
  const probe = (name: string, host: string, port: string) => `if busybox nc -w 2 ${host} ${port} </dev/null; then echo ${name}=reached; else echo ${name}=refused; fi`;
  const temporal = () => String(c.env.TEMPORAL_ADDRESS).split(':') as [string, string];
  const containers = () => execFileSync('podman', ['ps', '--all', '--format', '{{.Names}}'], { encoding: 'utf8' });

  it('a bad reference is one line from gpuctl and a 400 from the API', async () => {
    const r = await gpuctlIn(env, ['submit', '--image', 'Not/An Image', '--', 'true']);
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('is not an OCI image reference');
    const res = await fetch(`${c.apiUrl}/api/v1/jobs`, { method: 'POST', headers: { ...c.auth, 'content-type': 'application/json' }, body: JSON.stringify({ command: 'true', image: 'busybox:1 && true' }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/^image "busybox:1 && true" is not an OCI image reference/);
  });

  it("waits where no node has a runtime, then runs in the image on one that has: its cards, its working dir, a checkpoint that registers and is evaluated in the image; an image that cannot be pulled fails with podman's line", async () => {
    const work = fs.mkdtempSync(path.join(c.work, 'img-'));
    const id = await submit(['--project', 'images', '--gpus', '2', '--memory', '256M', '--workdir', work, '--watch', 'ckpt', '--eval', 'test "$(cat "$GPUPLANE_CHECKPOINT_PATH/model.bin")" = w && echo "{\\"metrics\\": {\\"acc\\": 1}}"', '--', 'sh', '-c', `echo "cvd=$CUDA_VISIBLE_DEVICES pwd=$(pwd) busybox=$(ls -l /bin/sh | grep -c busybox) mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null)"; mkdir -p ckpt/step-1 && echo w > ckpt/step-1/model.bin; ${probe('temporal', ...temporal())}; sleep 1`], 'TRAIN');
    // And one whose image no registry has (none answers on localhost): it fails with podman's line, while the first runs.
    const absent = (await gpuctlIn(env, ['submit', '--type', 'CUSTOM', '--image', 'localhost/gpuplane-test/absent:1', '--', 'true'])).stdout.trim().split('\n').pop()!;
    const waiting = await until('the no-runtime reason', async () => {
      const j = await c.client.job(id);
      return j.state === 'QUEUED' && j.reason?.includes('container runtime') ? j : null;
    });
    expect(waiting.reason).toBe('no ONLINE node has a container runtime (runtime=podman)');
    const agent = await c.addAgent(podmanAgent);
    expect(agent.output).toContain('"runtime":"podman"');
    const done = await c.client.waitFor(id, undefined, 60_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    expect(done.node_id).toBe('ct-a');
    const log = await logWith(id, 'cvd=');
    expect(log).toMatch(new RegExp(`cvd=${done.gpu_indices!.join(',')} pwd=${work} busybox=1 mem=268435456`));
    // Jobs of this node run as root (no job users): nothing guards Temporal's port from them, in a container or not (the guard's test below needs this to mean something).
    expect(await logWith(id, 'temporal=')).toContain('temporal=reached');
    // With --fake-gpus there are no /dev/nvidiaN to give it: CUDA_VISIBLE_DEVICES is what says its cards.
    const ckpt = await until('its checkpoint', async () => (await checkpointsOf(id))[0] ?? null, 15_000);
    expect(ckpt.uri).toBe(path.join(work, 'ckpt', 'step-1'));
    expect(containers()).not.toContain(`gpuplane-${id}-1`);
    // Its evaluation inherits the image (and the runtime label), and reads the checkpoint in it.
    const evaluated = await until('its evaluation', async () => {
      const e = (await c.client.request<{ evaluations: { job_id: string | null; status: string }[] }>('GET', `/checkpoints/${ckpt.id}`)).evaluations[0];
      return e?.status === 'succeeded' || e?.status === 'failed' ? e : null;
    }, 30_000);
    const evalJob = await c.client.job(evaluated.job_id!);
    expect(evaluated.status, evalJob.reason ?? '').toBe('succeeded');
    expect(evalJob).toMatchObject({ image: TEST_IMAGE, node_id: 'ct-a', selector: { runtime: 'podman' } });
    const failed = await c.client.waitFor(absent, undefined, 30_000);
    expect(failed.state).toBe('FAILED');
    expect(failed.reason).toMatch(/^the image could not be pulled: podman: .*localhost\/gpuplane-test\/absent:1.* \(exit code 125\) — hint: check the image reference/);
    // Its pull was a step of its own, in its events (image-pull.ts); the image the node had was not pulled.
    const events = async (job: string) => (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${job}/events`)).events.filter((e) => e.kind === 'image.pulled').map((e) => e.message);
    expect(await events(absent)).toContain("pulling image localhost/gpuplane-test/absent:1 (not on this node yet; its podman pulls it with the node's registry settings)");
    expect(await events(id)).toEqual([]);
    // Its record says what ran it: the image, on the node with the runtime.
    const shown = await gpuctlIn(env, ['job', id]);
    expect(shown.stdout).toMatch(/^image: +localhost\/gpuplane-test\/busybox:1 \(run by its node's podman\)$/m);
  });

  it("cancel: SIGTERM reaches the container's process, which saves within the grace; the container is gone", async () => {
    const id = await submit(['--gpus', '1', '--', 'sh', '-c', 'trap "echo got-term; sleep 1; echo saved; exit 0" TERM; echo ready; while :; do sleep 0.2; done']);
    await logWith(id, 'ready', 30_000);
    expect(containers()).toContain(`gpuplane-${id}-1`);
    await c.client.cancel(id);
    const done = await c.client.waitFor(id, undefined, 30_000);
    expect(done.state).toBe('CANCELLED');
    const log = await logWith(id, 'saved');
    expect(log).toContain('got-term');
    await until('the container removed', () => !containers().includes(`gpuplane-${id}-1`), 10_000);
  });

  it('cancel of a container that ignores SIGTERM: killed after the grace, the container removed by name', async () => {
    const id = await submit(['--gpus', '1', '--', 'sh', '-c', 'trap "" TERM; echo stubborn; while :; do sleep 0.2; done']);
    await logWith(id, 'stubborn', 30_000);
    const asked = Date.now();
    await c.client.cancel(id);
    const done = await c.client.waitFor(id, undefined, 30_000);
    expect(done.state).toBe('CANCELLED');
    // The agent's grace (GPUPLANE_KILL_GRACE_S=2) passed before the kill.
    expect(Date.now() - asked).toBeGreaterThanOrEqual(1900);
    await until('the container removed', () => !containers().includes(`gpuplane-${id}-1`), 10_000);
  });

  it("runs in the attempt's cgroups: over its memory limit it ends with a bare job's OOM reason, and no cgroup of it is left", async (ctx) => {
    if (c.agents.get('ct-a')!.output.includes(NO_MEMORY_LIMIT)) {
      console.log('skipped: the agent has no memory controller here');
      ctx.skip();
    }
    // It says where it is, then grows a shell variable from /dev/zero until the kernel stops it.
    const work = fs.mkdtempSync(path.join(c.work, 'img-oom-'));
    const id = await submit(['--gpus', '1', '--memory', '64M', '--workdir', work, '--', 'sh', '-c', 'cat /proc/self/cgroup; echo listed; x=$(tr "\\0" x </dev/zero); echo survived']);
    const done = await c.client.waitFor(id, undefined, 60_000);
    expect(done.state).toBe('FAILED');
    // Word for word what memory-limit.e2e asserts of a plain process.
    expect(done.reason).toBe(`out of memory: the job's limit is 64 MiB (memory_mb); exit signal SIGKILL — hint: give it more, e.g. gpuctl retry ${id} --memory 128M`);
    // Its processes were below the attempt's cgroups (counted by its pids.max, weighed by the jobs' CPU weight, ended by its cgroup.kill).
    const log = await logWith(id, 'listed');
    const below = `/gpuplane/ct-a/${id}.1/`;
    for (const h of ['pids', 'memory', 'cpu']) expect(log.split('\n').find((l) => l.split(':')[1]?.split(',').includes(h)), h).toContain(below);
    expect(log).not.toContain('survived');
    // conmon (root) writes a file `oom` into its own folder: the agent's, never the job's, which the job's user could have linked anywhere.
    expect(fs.readdirSync(work)).toEqual([]);
    // Nothing of it is left in any hierarchy, runc's empty folders included.
    await until('its cgroups removed', () => !execFileSync('find', ['/sys/fs/cgroup', '-maxdepth', '8', '-type', 'd', '-name', `${id}.1`], { encoding: 'utf8' }).trim(), 10_000);
  });

  it.skipIf(noJobUsers !== null)("where jobs run as users of their own, the container's process is the project's user (podman itself is root's), kept off Temporal by the port guard", async () => {
    await c.addAgent({ ...podmanAgent, nodeId: 'ct-u', args: ['--job-users', '3450000-3450099'] });
    // Where that user may go (the cluster's folders are root's alone).
    const work = fs.mkdtempSync('/var/tmp/gpuplane-img-u-');
    fs.chmodSync(work, 0o777);
    onTestFinished(() => fs.rmSync(work, { recursive: true, force: true }));
    // The port guard (nftables, by uid) keeps the container off Temporal as it keeps a plain job; the API stays open to it.
    const id = await submit(['--project', 'img-users', '--selector', 'node=ct-u', '--workdir', work, '--', 'sh', '-c', `echo "uid=$(id -u) gid=$(id -g)"; grep -E '^(NoNewPrivs|CapBnd|CapEff):' /proc/self/status; touch made-here; ${probe('temporal', ...temporal())}; ${probe('api', new URL(c.apiUrl).hostname, new URL(c.apiUrl).port)}`]);
    const done = await c.client.waitFor(id, undefined, 30_000);
    expect(done.state, done.attempts.at(-1)?.reason ?? '').toBe('SUCCEEDED');
    const [, uid, gid] = /uid=(\d+) gid=(\d+)/.exec(await logWith(id, 'uid='))!;
    expect(Number(uid)).toBeGreaterThanOrEqual(3450000);
    expect(fs.statSync(path.join(work, 'made-here'))).toMatchObject({ uid: Number(uid), gid: Number(gid) });
    const log = await logWith(id, 'api=');
    // No capability, and no setuid binary of the image can make it the node's root.
    expect(log).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(log).toMatch(/^CapBnd:\s+0+$/m);
    expect(log).toMatch(/^CapEff:\s+0+$/m);
    expect(log).toContain('temporal=refused');
    expect(log).toContain('api=reached');
  });

  it('an agent restarted while its image job runs re-attaches: the job ends as attempt 1', async () => {
    // It runs until told to end (a file in its working dir): however long the agent takes to come back, it is still running then.
    const work = fs.mkdtempSync('/var/tmp/gpuplane-img-restart-');
    fs.chmodSync(work, 0o777);
    onTestFinished(() => fs.rmSync(work, { recursive: true, force: true }));
    const id = await submit(['--gpus', '1', '--workdir', work, '--', 'sh', '-c', 'echo tick 1; echo tick 2; while [ ! -e go ]; do sleep 0.2; done; echo tick 5']);
    await logWith(id, 'tick 2', 30_000);
    await c.agents.get('ct-a')!.kill('SIGKILL');
    const agent = await c.addAgent(podmanAgent);
    expect(agent.output).toContain('re-attached to 1 running attempt');
    fs.writeFileSync(path.join(work, 'go'), '');
    const done = await c.client.waitFor(id, undefined, 60_000);
    expect(done.attempts.map((a) => [a.attempt, a.state])).toEqual([[1, 'SUCCEEDED']]);
    expect(await logWith(id, 'tick 5')).toContain('tick 5');
  });
});
