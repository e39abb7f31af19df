import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ImagePulls } from '../activities/gpu-host/image-pull.ts';
import { prepareTestImage, TEST_IMAGE } from './support/busybox-image.ts';

const setup = prepareTestImage();
const skip = 'skip' in setup ? setup.skip : null;
if (skip) console.warn(`image-pull skipped: ${skip}`);

/**
 * An image job's image is pulled as a step of its own where the node has none (issue 45), through
 * the real podman: a wrapper before it records each call and makes each pull take a second, so
 * that two attempts asking at once overlap. No registry here: the image pulled is the test image
 * saved as an OCI archive (`oci-archive:` is a transport podman pulls from).
 */
describe.skipIf(skip !== null)("an image job's image", () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-image-pull-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const calls = path.join(tmp, 'calls');
  const bin = path.join(tmp, 'podman');
  const real = 'podman' in setup ? setup.podman : 'podman';
  fs.writeFileSync(bin, `#!/bin/sh\necho "$*" >> ${calls}\n[ "$1" = pull ] && sleep 1\nexec ${real} "$@"\n`, { mode: 0o755 });
  const pulls = new ImagePulls({ bin, version: 'test', runArgs: [] });
  const notes = () => {
    const said: string[] = [];
    return { said, note: async (m: string) => void said.push(m) };
  };
  const called = () => (fs.existsSync(calls) ? fs.readFileSync(calls, 'utf8').trim().split('\n') : []);

  it('is not pulled, and nothing is said, where the node has it', async () => {
    const n = notes();
    expect(await pulls.prepare(TEST_IMAGE, n.note, new AbortController().signal)).toBeNull();
    expect(n.said).toEqual([]);
    expect(called()).toEqual([`image exists ${TEST_IMAGE}`]);
  });

  it('is pulled once for two attempts that need it at once, each told what happens, the pull timed', async () => {
    fs.rmSync(calls, { force: true });
    const archive = path.join(tmp, 'busybox.tar');
    execFileSync(real, ['save', '--quiet', '--format', 'oci-archive', '-o', archive, TEST_IMAGE]);
    const ref = `oci-archive:${archive}`;
    const [a, b] = [notes(), notes()];
    const results = await Promise.all([pulls.prepare(ref, a.note, new AbortController().signal), pulls.prepare(ref, b.note, new AbortController().signal)]);
    expect(results).toEqual([null, null]);
    expect(called().filter((c) => c.startsWith('pull '))).toEqual([`pull --quiet ${ref}`]);
    // Whichever asked first pulls; the other waits for it.
    const [puller, waiter] = a.said.length === 2 ? [a, b] : [b, a];
    expect(puller.said).toEqual([`pulling image ${ref} (not on this node yet; its podman pulls it with the node's registry settings)`, expect.stringMatching(new RegExp(`^pulled image ${ref.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} in \\d+\\.\\d s$`))]);
    expect(waiter.said).toEqual([`image ${ref} is being pulled for another attempt on this node: waiting for it`]);
  });

  it("that no registry has fails the attempt with podman's line and a hint", async () => {
    const n = notes();
    const problem = await pulls.prepare('localhost/gpuplane-test/absent:1', n.note, new AbortController().signal);
    expect(problem).toMatch(/^the image could not be pulled: podman: initializing source docker:\/\/localhost\/gpuplane-test\/absent:1: .* \(exit code 125\) — hint: check the image reference, and that the node can pull it \(podman pull localhost\/gpuplane-test\/absent:1 there\)$/);
    expect(problem!.split('\n')).toHaveLength(1);
    expect(n.said).toEqual(['pulling image localhost/gpuplane-test/absent:1 (not on this node yet; its podman pulls it with the node\'s registry settings)']);
  });

  it('is waited for no longer once the attempt is cancelled', async () => {
    const stop = new AbortController();
    const started = Date.now();
    const waiting = pulls.prepare('localhost/gpuplane-test/absent:2', async () => undefined, stop.signal);
    setTimeout(() => stop.abort(), 200);
    expect(await waiting).toBeNull();
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
