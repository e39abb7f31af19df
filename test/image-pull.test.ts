import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageBook } from '../activities/gpu-host/image-cache-book.ts';
import { ImagePulls } from '../activities/gpu-host/image-pull.ts';
import { formatBytes } from '../domain/env-cache.ts';
import { prepareTestImage, TEST_IMAGE } from './support/busybox-image.ts';
import { until } from './support/poll.ts';

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

/**
 * The bound of the images the agent pulled (issue 45), with the real podman: two small images of
 * their own (each a tarball of one file of its own bytes, `podman import`ed, saved as an OCI
 * archive and removed, so that pulling the archive brings it back) and a bound that holds one.
 */
describe.skipIf(skip !== null)('the images the agent pulled', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-image-cache-'));
  const real = 'podman' in setup ? setup.podman : 'podman';
  const podman = { bin: real, version: 'test', runArgs: [] };
  const said: string[] = [];
  const log = (m: string) => void said.push(m);
  const tag = `${process.pid}-${Date.now()}`;
  const ask = (...args: string[]) => execFileSync(real, args, { encoding: 'utf8' }).trim();
  const has = (id: string) => spawnSync(real, ['image', 'exists', id]).status === 0;
  const noNote = async () => undefined;
  const never = new AbortController().signal;
  const container = `gpuplane-image-cache-${tag}`;
  const escaped = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

  /** A small image of its own, as an OCI archive only (podman does not hold it): its reference and id. */
  function archivedImage(name: string): { ref: string; id: string; bytes: number } {
    const root = path.join(tmp, `${name}-root`);
    fs.mkdirSync(root);
    fs.writeFileSync(path.join(root, name), randomBytes(64 * 1024));
    execFileSync('tar', ['-C', root, '-cf', path.join(tmp, `${name}.tar`), '.']);
    const full = `localhost/gpuplane-test/cache-${name}-${tag}:1`;
    const id = ask('import', '--quiet', path.join(tmp, `${name}.tar`), full).replace(/^sha256:/, '');
    const bytes = Number(ask('image', 'inspect', '--format', '{{.Size}}', id));
    const archive = path.join(tmp, `${name}.oci.tar`);
    ask('save', '--quiet', '--format', 'oci-archive', '-o', archive, full);
    ask('rmi', id);
    return { ref: `oci-archive:${archive}`, id, bytes };
  }

  let a: ReturnType<typeof archivedImage>;
  let b: ReturnType<typeof archivedImage>;
  let bound: number;
  let book: ImageBook;
  let pulls: ImagePulls;
  beforeAll(() => {
    a = archivedImage('a');
    b = archivedImage('b');
    // Room for one of them, not both.
    bound = Math.max(a.bytes, b.bytes) + Math.floor(Math.min(a.bytes, b.bytes) / 2);
    book = new ImageBook(podman, path.join(tmp, 'images'), { maxBytes: bound, log });
    pulls = new ImagePulls(podman, book);
  });
  afterAll(() => {
    spawnSync(real, ['rm', '--force', container]);
    if (a && b) spawnSync(real, ['rmi', '--ignore', a.id, b.id]);
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('after the next pull, the least recently used goes, never the one an attempt uses', async () => {
    expect([has(a.id), has(b.id)]).toEqual([false, false]);
    expect(await pulls.prepare(a.ref, noNote, never)).toBeNull();
    pulls.release(a.ref);
    await book.evict();
    expect(has(a.id)).toBe(true);
    // Its size as podman says it once pulled (a few bytes more than the imported image's).
    expect(book.list().map((e) => [e.id, e.refs, e.names, e.owned, e.inUse])).toEqual([[a.id, [a.ref], [`localhost/gpuplane-test/cache-a-${tag}:1`], true, 0]]);
    const aBytes = book.list()[0].bytes;
    // b is pulled for an attempt: a, used before it, goes (the pass after the pull).
    expect(await pulls.prepare(b.ref, noNote, never)).toBeNull();
    await book.evict();
    expect([has(a.id), has(b.id)]).toEqual([false, true]);
    expect(book.list().map((e) => [e.id, e.inUse])).toEqual([[b.id, 1]]);
    const bBytes = book.list()[0].bytes;
    expect(said).toEqual([`images: removed image ${a.ref} (${a.id.slice(0, 12)}, ${formatBytes(aBytes)}), the least recently used, to keep the images GPUPlane pulled within ${formatBytes(bound)} (--image-cache-size); they held ${formatBytes(aBytes + bBytes)}`]);
  });

  it('an image an attempt adopted after a restart runs in stays past the bound, and goes once that attempt ended', async () => {
    said.length = 0;
    let ended!: () => void;
    // What the agent's next life does for an attempt still running in b; the hold of the life before is gone.
    pulls.holdWhile(b.ref, new Promise<void>((resolve) => (ended = resolve)));
    pulls.release(b.ref);
    // a again, for another attempt: both in use, past the bound, and both stay.
    expect(await pulls.prepare(a.ref, noNote, never)).toBeNull();
    await book.evict();
    expect([has(a.id), has(b.id)]).toEqual([true, true]);
    expect(said).toEqual([]);
    ended();
    await until('the adopted attempt gives b back', () => book.list().find((e) => e.id === b.id)?.inUse === 0);
    await book.evict();
    expect([has(a.id), has(b.id)]).toEqual([true, false]);
    expect(said).toEqual([expect.stringMatching(new RegExp(`^images: removed image ${escaped(b.ref)} \\(${b.id.slice(0, 12)}, `))]);
  });

  it('an image podman says a container uses is left, not forced; it goes once the container is gone', async () => {
    said.length = 0;
    pulls.release(a.ref);
    ask('create', '--name', container, a.id, 'true');
    // b again: a is the least recently used, and podman keeps it for the container.
    expect(await pulls.prepare(b.ref, noNote, never)).toBeNull();
    await book.evict();
    expect([has(a.id), has(b.id)]).toEqual([true, true]);
    expect(said.length).toBeGreaterThan(0);
    for (const line of said) expect(line).toMatch(new RegExp(`^images: left image ${escaped(a.ref)} \\(${a.id.slice(0, 12)}, .*\\), though the least recently used past the bound: podman says it is in use by a container \\(.*\\); not forced$`));
    ask('rm', container);
    await book.evict();
    expect([has(a.id), has(b.id)]).toEqual([false, true]);
    pulls.release(b.ref);
  });

  it('an image the node had is never recorded nor removed, even past a bound of nothing', async () => {
    const testId = ask('image', 'inspect', '--format', '{{.Id}}', TEST_IMAGE);
    const names = ask('image', 'inspect', '--format', '{{json .RepoTags}}', TEST_IMAGE);
    const zero = new ImageBook(podman, path.join(tmp, 'images-zero'), { maxBytes: 0, log });
    const pullsZero = new ImagePulls(podman, zero);
    expect(await pullsZero.prepare(TEST_IMAGE, noNote, never)).toBeNull();
    pullsZero.release(TEST_IMAGE);
    expect(await zero.evict()).toEqual([]);
    expect(zero.list()).toEqual([]);
    // Pulled from an archive of it: podman had that image, so the record counts nothing and takes nothing away.
    const archive = path.join(tmp, 'busybox.oci.tar');
    ask('save', '--quiet', '--format', 'oci-archive', '-o', archive, TEST_IMAGE);
    const ref = `oci-archive:${archive}`;
    expect(await pullsZero.prepare(ref, noNote, never)).toBeNull();
    pullsZero.release(ref);
    await zero.evict();
    expect(zero.list().map((e) => [e.id, e.names, e.owned])).toEqual([[testId, [], false]]);
    expect(has(testId)).toBe(true);
    expect(ask('image', 'inspect', '--format', '{{json .RepoTags}}', TEST_IMAGE)).toBe(names);
  });
});
