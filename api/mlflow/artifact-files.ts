/**
 * Where MLflow's artifacts are kept, as api/mlflow/artifacts.ts reads and writes them: one owner's
 * files (a run's, a logged model's, a trace's: their ids never collide) under `<owner id>/<path>`.
 * Where the plane's store is shared (`shared:` or `s3://`, docs/storage.md) they are objects of it
 * under `artifacts/`, so every API replica serves what any of them received; with a `local` store
 * they stay in the API's artifact folder (GPUPLANE_ARTIFACTS_DIR), the same layout, so a plane that
 * moves to a shared store copies that folder to `artifacts/` of the store and loses nothing.
 *
 * Both are an ObjectStore: an object appears whole or not at all (a folder store renames a file
 * written beside it, S3 publishes an upload when it completes), so a cut upload is never listed.
 */
import { Readable } from 'node:stream';
import { folderStore } from '../../runtime/folder-store.ts';
import { keyRefusal, NoSuchObjectError, type ObjectStore } from '../../runtime/object-store-types.ts';
import { invalid } from './context.ts';

/** MLflow's FileInfo: a name in one folder, a folder or a file of that size. */
export interface ArtifactEntry {
  path: string;
  is_dir: boolean;
  file_size?: number;
}

export interface ArtifactFiles {
  /** Where they are, for logs: the folder, or the store and its prefix. */
  readonly where: string;
  /** The entries of one folder of an owner's artifacts ('' for its root), sorted by name; none for a file or nothing. */
  list(owner: string, rel: string): Promise<ArtifactEntry[]>;
  /** A file's size and bytes, or null where there is no such file (a folder is none). */
  read(owner: string, rel: string): Promise<{ size: number; body: Readable } | null>;
  /** Writes a file from a stream; it appears once whole. A path through a file, or onto a folder, is refused (400). */
  write(owner: string, rel: string, body: Readable): Promise<void>;
  /** Removes a file, or a folder and everything under it ('' for all of an owner's files). */
  remove(owner: string, rel: string): Promise<void>;
}

/** What the old artifact code left of an upload it never finished (`<name>.upload-<12 hex>`): never listed. */
const LEFTOVER = /\.upload-[0-9a-f]{12}$/;

/**
 * The artifacts of this API: in the store where it is shared by every replica, else in `dir`;
 * null when there is neither (artifacts are not served).
 */
export function artifactFiles(o: { store?: ObjectStore | null; dir: string | null }): ArtifactFiles | null {
  if (o.store && o.store.kind !== 'local') return storeArtifacts(o.store, 'artifacts', `${o.store.describe} (artifacts/)`);
  if (o.dir) return storeArtifacts(folderStore('local', o.dir, o.dir), '', o.dir);
  return null;
}

function storeArtifacts(store: ObjectStore, base: string, where: string): ArtifactFiles {
  const keyOf = (owner: string, rel: string) => {
    const key = [base, owner, rel].filter((s) => s !== '').join('/');
    const refused = keyRefusal(key);
    if (refused) throw invalid(`invalid artifact path "${rel.slice(0, 200)}": ${refused.replace(/^key "[^"]*"/, 'it')}`);
    return key;
  };

  async function list(owner: string, rel: string): Promise<ArtifactEntry[]> {
    const prefix = `${keyOf(owner, rel)}/`;
    const dirs = new Set<string>();
    const files = new Map<string, number>();
    for (const o of await store.list(prefix)) {
      const rest = o.key.slice(prefix.length);
      const cut = rest.indexOf('/');
      if (cut >= 0) dirs.add(rest.slice(0, cut));
      else if (!LEFTOVER.test(rest)) files.set(rest, o.size);
    }
    const out: ArtifactEntry[] = [...[...dirs].map((name) => ({ path: name, is_dir: true })), ...[...files].map(([name, size]) => ({ path: name, is_dir: false, file_size: size }))];
    return out.sort((a, b) => a.path.localeCompare(b.path));
  }

  async function read(owner: string, rel: string): Promise<{ size: number; body: Readable } | null> {
    if (rel === '') return null;
    const key = keyOf(owner, rel);
    const info = await store.head(key);
    if (!info) return null;
    try {
      return { size: info.size, body: await store.get(key) };
    } catch (err) {
      // Deleted between the two: as if it had never been there.
      if (err instanceof NoSuchObjectError) return null;
      throw err;
    }
  }

  async function write(owner: string, rel: string, body: Readable): Promise<void> {
    const key = keyOf(owner, rel);
    // One name is a file or a folder, never both (a folder store could not hold both; S3 could, and
    // MLflow's listing would then show one name twice).
    const segs = rel.split('/');
    for (let i = 1; i < segs.length; i++) {
      const above = segs.slice(0, i).join('/');
      if (await store.head(keyOf(owner, above))) throw invalid(`cannot upload ${rel.slice(0, 200)}: ${above.slice(0, 200)} is a file, not a folder`);
    }
    if ((await store.list(`${key}/`)).length > 0) throw invalid(`cannot upload ${rel.slice(0, 200)}: it is a folder of artifacts`);
    await store.put(key, body);
  }

  async function remove(owner: string, rel: string): Promise<void> {
    const key = keyOf(owner, rel);
    await store.delete({ prefix: `${key}/` });
    if (rel !== '') await store.delete({ keys: [key] });
  }

  return { where, list, read, write, remove };
}

/** An empty upload has no body for the route to stream: nothing reaches the handler. */
export const emptyBody = (): Readable => Readable.from([]);
