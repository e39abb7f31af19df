/**
 * Where MLflow's artifacts are kept (api/mlflow/artifact-files.ts): a `shared:` store holds them
 * under `artifacts/`, a `local` plane in its artifact folder, where files of the old layout are
 * read as they are. The real processes and S3 server are test/mlflow-artifacts-store.e2e.test.ts's.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { artifactFiles, type ArtifactFiles } from '../api/mlflow/artifact-files.ts';
import { openStore, parseStorage } from '../runtime/object-store.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-artifact-files-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const text = async (files: ArtifactFiles, owner: string, rel: string) => {
  const got = await files.read(owner, rel);
  if (!got) return null;
  const chunks: Buffer[] = [];
  for await (const c of got.body) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
};
/** The refusal's message, asserted to be a 400 of one line. */
const refusal = async (p: Promise<unknown>) => {
  const err = (await p.then(() => null, (e: unknown) => e)) as { status?: number; message: string } | null;
  expect(err?.status).toBe(400);
  expect(err!.message).not.toContain('\n');
  return err!.message;
};

describe('MLflow artifact files', () => {
  it('a shared: store keeps them under artifacts/<owner id>/, folders and sizes listed, nothing in the artifact folder', async () => {
    const shared = path.join(tmp, 'shared');
    fs.mkdirSync(shared);
    const dir = path.join(tmp, 'unused-artifacts');
    const store = await openStore(parseStorage(`shared:${shared}`), { home: tmp, storeId: 'plane-1', mayCreate: true });
    const files = artifactFiles({ store, dir })!;
    await files.write('run-1', 'x.txt', Readable.from([Buffer.from('hello')]));
    await files.write('run-1', 'a/b/c.bin', Readable.from([Buffer.alloc(3)]));
    await files.write('m-1', 'MLmodel', Readable.from([Buffer.from('flavors: {}')]));
    expect(fs.readFileSync(path.join(shared, 'artifacts', 'run-1', 'a', 'b', 'c.bin')).length).toBe(3);
    expect(fs.existsSync(dir)).toBe(false);
    expect(await files.list('run-1', '')).toEqual([
      { path: 'a', is_dir: true },
      { path: 'x.txt', is_dir: false, file_size: 5 },
    ]);
    expect(await files.list('run-1', 'a')).toEqual([{ path: 'b', is_dir: true }]);
    expect(await files.list('run-1', 'x.txt')).toEqual([]);
    expect(await text(files, 'run-1', 'x.txt')).toBe('hello');
    expect(await files.read('run-1', 'a')).toBeNull();
    expect(await files.read('run-2', 'x.txt')).toBeNull();

    // One name is a file or a folder; a name the store keeps for itself is refused.
    expect(await refusal(files.write('run-1', 'x.txt/y', Readable.from([])))).toBe('cannot upload x.txt/y: x.txt is a file, not a folder');
    expect(await refusal(files.write('run-1', 'a/b', Readable.from([])))).toBe('cannot upload a/b: it is a folder of artifacts');
    expect(await refusal(files.write('run-1', '.gpuplane-store', Readable.from([])))).toMatch(/^invalid artifact path "\.gpuplane-store": it uses a name the store keeps for itself/);

    // A folder goes with all under it; another owner's files stay.
    await files.remove('run-1', 'a');
    expect(await files.list('run-1', '')).toEqual([{ path: 'x.txt', is_dir: false, file_size: 5 }]);
    expect(await text(files, 'm-1', 'MLmodel')).toBe('flavors: {}');
    await store.close();
  });

  it('a local plane keeps its artifact folder: files of the old layout are read, its leftovers never listed', async () => {
    const dir = path.join(tmp, 'artifacts');
    fs.mkdirSync(path.join(dir, 'run-old', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'run-old', 'sub', 'old.txt'), 'from before');
    // What an upload cut off under the old code left beside its file.
    fs.writeFileSync(path.join(dir, 'run-old', 'sub', 'old.txt.upload-0123456789ab'), 'half');
    const store = await openStore(parseStorage('local'), { home: tmp });
    const files = artifactFiles({ store, dir })!;
    expect(await files.list('run-old', 'sub')).toEqual([{ path: 'old.txt', is_dir: false, file_size: 11 }]);
    expect(await text(files, 'run-old', 'sub/old.txt')).toBe('from before');
    await files.write('run-new', 'n.txt', Readable.from([Buffer.from('new')]));
    expect(fs.readFileSync(path.join(dir, 'run-new', 'n.txt'), 'utf8')).toBe('new');
    expect(fs.readdirSync(path.join(tmp, 'store'))).toEqual([]);
    expect(artifactFiles({ store, dir: null })).toBeNull();
    await store.close();
  });
});
