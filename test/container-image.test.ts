import { describe, expect, it } from 'vitest';
import { applyPatch, type AttemptConfig } from '../domain/attempt-config.ts';
import { imageRefProblem, placementSelector } from '../domain/container-image.ts';
import { neverFitsReason } from '../domain/placement.ts';
import { classifyFailure } from '../domain/failure.ts';
import { freeCardsReason } from '../domain/queue-reasons.ts';
import { containerCgroupParent } from '../activities/gpu-host/cgroup-container.ts';
import { containerCommand, containerExit, containerName, podmanEnv } from '../activities/gpu-host/container-run.ts';

describe('container images (issue 45 part 2): the pure parts', () => {
  it('takes OCI references and refuses the rest in one line', () => {
    for (const ok of ['busybox', 'gpuplane-test/busybox:1', 'localhost/gpuplane-test/busybox:1', 'docker.io/library/python:3.12', 'registry.example.com:5000/team/train:v1.2-cuda12', `ghcr.io/a/b@sha256:${'a'.repeat(64)}`, `python:3.12@sha256:${'0'.repeat(64)}`]) {
      expect(imageRefProblem(ok), ok).toBeNull();
    }
    for (const bad of ['', 'Busybox', 'busybox:', 'a//b', 'busybox:1 && rm -rf /', '-v/:/host', 'busybox@sha256:xyz', `x:${'t'.repeat(200)}`, ' busybox']) {
      const p = imageRefProblem(bad);
      expect(p, bad).toMatch(/^image/);
      expect(p).not.toContain('\n');
    }
  });

  it('an image job is placed only on a node labelled runtime=podman, whatever selector a retry gives', () => {
    expect(placementSelector({ pool: 'a' }, 'busybox')).toEqual({ pool: 'a', runtime: 'podman' });
    expect(placementSelector({ pool: 'a' }, null)).toEqual({ pool: 'a' });
    const prev: AttemptConfig = { command: ['true'], workingDir: '/w', env: {}, gpus: 1, selector: { runtime: 'podman' }, priority: 0, params: {}, image: 'busybox:1' };
    expect(applyPatch(prev, {})).toMatchObject({ image: 'busybox:1', selector: { runtime: 'podman' } });
    expect(applyPatch(prev, { selector: { pool: 'b' } }).selector).toEqual({ pool: 'b', runtime: 'podman' });
    expect(applyPatch(prev, { image: 'other:2' }).image).toBe('other:2');
    // null: a plain process again (the runtime label it asked for stays, harmlessly, until a selector is given).
    expect(applyPatch(prev, { image: null, selector: {} })).not.toHaveProperty('image');
    expect(applyPatch(prev, { image: null, selector: {} }).selector).toEqual({});
  });

  it('a job with an image waits, where no node has a runtime, with that reason', () => {
    const rooms = [{ id: 'n1', labels: { node: 'n1' }, totalCards: 2, free: [0, 1] }];
    const job = { id: 'j', gpus: 1, nodes: 1, selector: { runtime: 'podman' }, priority: 0, queuedAt: new Date(), attempt: 1 };
    expect(neverFitsReason(1, job.selector, rooms)).toBe('no ONLINE node has a container runtime (runtime=podman)');
    expect(freeCardsReason(job as never, rooms)).toBe('no ONLINE node has a container runtime (runtime=podman)');
    expect(neverFitsReason(1, job.selector, [{ ...rooms[0], labels: { node: 'n1', runtime: 'podman' } }])).toBeNull();
    // Another label missing is said as before; the runtime missing where the rest matches is said so.
    expect(neverFitsReason(1, { runtime: 'podman', pool: 'x' }, [{ ...rooms[0], labels: { runtime: 'podman' } }])).toBe('no ONLINE node matching runtime=podman,pool=x');
    expect(neverFitsReason(1, { node: 'n1', runtime: 'podman' }, [rooms[0], { ...rooms[0], id: 'n2', labels: { node: 'n2', runtime: 'podman' } }])).toBe('no ONLINE node matching node=n1 has a container runtime (runtime=podman)');
  });

  it("podman run: the job's names (values from podman's environment), its mounts, cards and user; nothing that steers podman in podman's environment", () => {
    const env = { PATH: '/usr/bin', CUDA_VISIBLE_DEVICES: '1,3', GPUPLANE_TOKEN: 'secret-ish', HOME: '/w', LD_PRELOAD: '/w/evil.so', API_KEY: 's3cret' };
    const cmd = containerCommand({
      podman: { bin: '/usr/bin/podman', version: 'podman version 4.3.1', runArgs: ['--runtime', 'runc'] },
      name: containerName('job_1', 2),
      image: 'gpuplane-test/busybox:1',
      command: ['sh', '-c', 'echo hi'],
      workingDir: '/w',
      env,
      mounts: [['/w', false], ['/ckpt', true], ['/w', false]],
      devices: ['/dev/nvidia1'],
      user: { uid: 1001, gid: 1001 },
      secretNames: ['API_KEY'],
      memoryMb: 512,
      maxPids: 4096,
    });
    expect(cmd.join(' ')).toBe(
      '/usr/bin/podman run --rm --name gpuplane-job_1-2 --network host --pull missing --user 1001:1001 --cap-drop all --security-opt no-new-privileges --memory 512m --memory-swap 512m --pids-limit 4096 --volume /w:/w --volume /ckpt:/ckpt:ro --device /dev/nvidia1 --env API_KEY --env CUDA_VISIBLE_DEVICES --env GPUPLANE_TOKEN --env HOME=/w --env LD_PRELOAD=/w/evil.so --workdir /w --runtime runc gpuplane-test/busybox:1 sh -c echo hi',
    );
    expect(podmanEnv(env)).toEqual({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C', CUDA_VISIBLE_DEVICES: '1,3', GPUPLANE_TOKEN: 'secret-ish', API_KEY: 's3cret' });
  });

  it("below the attempt's cgroups where the node holds its limits in v1 hierarchies (a hybrid host); podman's own cgroups on a unified one", () => {
    expect(containerCgroupParent({ base: '/u/gpuplane/n1', pidsBase: '/p/gpuplane/n1', memoryBase: '/m/own/gpuplane/n1' }, 'n1', 'job_1', 2)).toBe('gpuplane/n1/job_1.2');
    expect(containerCgroupParent({ base: null, pidsBase: '/p/gpuplane/n1', memoryBase: null }, 'n1', 'job_1', 2)).toBe('gpuplane/n1/job_1.2');
    expect(containerCgroupParent({ base: '/u/gpuplane/n1', pidsBase: '/u/gpuplane/n1', memoryBase: '/u/gpuplane/n1' }, 'n1', 'job_1', 2)).toBeNull();
    expect(containerCgroupParent({ base: '/u/gpuplane/n1', pidsBase: null, memoryBase: null }, 'n1', 'job_1', 2)).toBeNull();
    const cmd = containerCommand({ podman: { bin: '/usr/bin/podman', version: '', runArgs: [] }, name: 'x', image: 'i:1', command: ['true'], workingDir: '/w', env: {}, mounts: [], devices: [], user: null, secretNames: [], cgroupParent: 'gpuplane/n1/job_1.2' });
    expect(cmd.join(' ')).toContain('--cgroups no-conmon --cgroup-parent gpuplane/n1/job_1.2 ');
  });

  it("podman's 128+N is its container's process killed by signal N, as a plain process's status says it", () => {
    expect(containerExit({ code: 137, signal: null })).toEqual({ code: null, signal: 'SIGKILL' });
    expect(containerExit({ code: 143, signal: null })).toEqual({ code: null, signal: 'SIGTERM' });
    for (const r of [{ code: 1, signal: null }, { code: 128, signal: null }, { code: 125, signal: null }, { code: null, signal: 'SIGKILL' }, { code: 250, signal: null }]) expect(containerExit(r)).toEqual(r);
  });

  it("podman's own failure (exit 125: the image not pulled) is said as such, with the image; a plain job's 125 is its own", () => {
    const tail = 'Trying to pull localhost/x/absent:1...\ntime="…" level=warning msg="Failed, retrying in 1s ... (1/3). Error: …"\nError: initializing source docker://localhost/x/absent:1: pinging container registry localhost: connection refused\n';
    expect(classifyFailure({ exitCode: 125, signal: null, logTail: tail, jobId: 'job-1', image: 'localhost/x/absent:1' }).reason).toBe(
      'the container did not start: podman: initializing source docker://localhost/x/absent:1: pinging container registry localhost: connection refused (exit code 125) — hint: check the image reference, and that the node can pull it (podman pull localhost/x/absent:1 there)',
    );
    expect(classifyFailure({ exitCode: 125, signal: null, logTail: tail, jobId: 'job-1' }).reason).toMatch(/^exit code 125/);
  });
});
