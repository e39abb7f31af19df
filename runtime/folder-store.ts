import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkKey, NoSuchObjectError, type DeleteWhat, type ObjectInfo, type ObjectStore, type PutBody, type PutOptions } from './object-store-types.ts';

/** Where a folder store keeps its half-written objects: inside the root, so that the rename is on one filesystem. */
const TMP_DIR = '.gpuplane-tmp';

/**
 * A store that is a folder: `local` (under the plane's home, on the API's machine) or `shared:`
 * (a folder mounted at the same path on every node). An object is a file at its key; it appears
 * whole or not at all (written beside, then renamed), as an S3 object does.
 */
export function folderStore(kind: 'local' | 'shared', root: string, describe: string): ObjectStore {
  const fileOf = (key: string) => {
    checkKey(key);
    return path.join(root, ...key.split('/'));
  };
  const infoOf = (key: string, st: fs.Stats): ObjectInfo => ({ key, size: st.size, modified: st.mtime });

  async function put(key: string, body: PutBody, opts: PutOptions = {}): Promise<ObjectInfo> {
    const dest = fileOf(key);
    const tmpDir = path.join(root, TMP_DIR);
    await fs.promises.mkdir(tmpDir, { recursive: true });
    const tmp = path.join(tmpDir, `${randomBytes(8).toString('hex')}.part`);
    try {
      const source = body instanceof Readable ? body : body instanceof Uint8Array ? Readable.from([body]) : fs.createReadStream(body.file);
      let loaded = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _enc, done) {
          loaded += chunk.length;
          opts.onProgress?.(loaded);
          done(null, chunk);
        },
      });
      await pipeline(source, counter, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o640 }), { signal: opts.signal });
      await fs.promises.mkdir(path.dirname(dest), { recursive: true });
      await fs.promises.rename(tmp, dest);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return infoOf(key, await fs.promises.stat(dest));
  }

  async function get(key: string): Promise<Readable> {
    const file = fileOf(key);
    // Opened before it is returned, so that a missing key rejects here and not on the first read.
    const handle = await fs.promises.open(file, 'r').catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'ENOENT' || err.code === 'EISDIR' ? new NoSuchObjectError(describe, key) : err;
    });
    return handle.createReadStream();
  }

  async function getToFile(key: string, file: string): Promise<ObjectInfo> {
    const source = await get(key);
    const tmp = `${file}.${randomBytes(6).toString('hex')}.part`;
    try {
      await fs.promises.mkdir(path.dirname(file), { recursive: true });
      await pipeline(source, fs.createWriteStream(tmp, { flags: 'wx' }));
      await fs.promises.rename(tmp, file);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return infoOf(key, await fs.promises.stat(file));
  }

  async function head(key: string): Promise<ObjectInfo | null> {
    const st = await fs.promises.stat(fileOf(key)).catch(() => null);
    return st?.isFile() ? infoOf(key, st) : null;
  }

  async function list(prefix: string): Promise<ObjectInfo[]> {
    // Walk only the folder the prefix reaches into: `ckpt/12/mod` starts at ckpt/12.
    const cut = prefix.lastIndexOf('/');
    const startKey = cut < 0 ? '' : prefix.slice(0, cut);
    if (startKey) checkKey(startKey);
    const out: ObjectInfo[] = [];
    const walk = async (dir: string, keyDir: string): Promise<void> => {
      const entries = await fs.promises.readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return [];
        throw err;
      });
      for (const e of entries) {
        if (e.name.startsWith('.gpuplane')) continue;
        const key = keyDir ? `${keyDir}/${e.name}` : e.name;
        // A folder is entered only when the prefix can still match something under it.
        if (e.isDirectory()) {
          if (key.startsWith(prefix) || prefix.startsWith(`${key}/`)) await walk(path.join(dir, e.name), key);
        } else if (e.isFile() && key.startsWith(prefix)) {
          const st = await fs.promises.stat(path.join(dir, e.name)).catch(() => null);
          if (st) out.push(infoOf(key, st));
        }
      }
    };
    await walk(startKey ? path.join(root, ...startKey.split('/')) : root, startKey);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async function remove(what: DeleteWhat): Promise<void> {
    const keys = 'keys' in what ? what.keys : (await list(what.prefix)).map((o) => o.key);
    for (const key of keys) {
      const file = fileOf(key);
      await fs.promises.rm(file, { force: true });
      await pruneEmptyDirs(path.dirname(file));
    }
  }

  /** Folders left empty by a delete go too (S3 has no folders), up to the root. */
  async function pruneEmptyDirs(dir: string): Promise<void> {
    for (let d = dir; d.startsWith(root + path.sep); d = path.dirname(d)) {
      const removed = await fs.promises.rmdir(d).then(
        () => true,
        () => false,
      );
      if (!removed) return;
    }
  }

  return { kind, describe, put, get, getToFile, head, list, delete: remove, close: async () => {} };
}
