/**
 * A code snapshot of a folder (`gpuctl submit --code DIR`, docs/storage.md "Code snapshots"): its
 * regular files and folders, less what its `.gitignore` files and `.gpuplaneignore` files leave
 * out (git's rules, by the `ignore` package; a file deeper down overrides one above, and a folder
 * left out is not entered) and less `.git`, as one tar whose bytes depend only on the tree: entries
 * sorted by path, every time 0, owner 0, modes 0644 or 0755. The same tree gives the same sha256,
 * which names the snapshot in the plane's store. Symbolic links (and sockets, fifos, devices) are
 * left out, and said.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import ignore, { type Ignore } from 'ignore';
import tar from 'tar-stream';
import { CODE_TAR_ROOT } from '../domain/code-snapshot.ts';

/** The ignore files read in every folder. */
export const IGNORE_FILES = ['.gitignore', '.gpuplaneignore'] as const;

export interface WalkedFile {
  /** Path relative to the folder, `/`-separated. */
  rel: string;
  size: number;
  executable: boolean;
}

export interface Walked {
  files: WalkedFile[];
  /** Folders (relative), parents first. */
  dirs: string[];
  /** What was left out for not being a regular file or folder (links first among them). */
  skipped: string[];
  bytes: number;
}

/** One folder's rules: its path relative to the root ('' for the root) and its matcher. */
interface Rules {
  base: string;
  ig: Ignore;
}

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Whether `rel` (a folder when `dir`) is left out: the deepest folder whose rules say anything decides. */
function ignored(stack: readonly Rules[], rel: string, dir: boolean): boolean {
  for (let i = stack.length - 1; i >= 0; i--) {
    const { base, ig } = stack[i];
    const sub = base === '' ? rel : rel.slice(base.length + 1);
    const t = ig.test(dir ? `${sub}/` : sub);
    if (t.ignored) return true;
    if (t.unignored) return false;
  }
  return false;
}

/** The rules of the ignore files in `abs` (none: null). */
function rulesOf(abs: string, base: string): Rules | null {
  const texts = IGNORE_FILES.map((n) => {
    try {
      return fs.readFileSync(path.join(abs, n), 'utf8');
    } catch {
      return '';
    }
  }).filter((t) => t !== '');
  return texts.length ? { base, ig: ignore().add(texts.join('\n')) } : null;
}

/** The files and folders of the snapshot of `root`, as the tar takes them. Throws one line for a root that is not a folder. */
export function walkCode(root: string): Walked {
  const st = fs.statSync(root, { throwIfNoEntry: false });
  if (!st) throw new Error(`--code ${root}: no such folder`);
  if (!st.isDirectory()) throw new Error(`--code ${root}: not a folder`);
  const out: Walked = { files: [], dirs: [], skipped: [], bytes: 0 };
  const walk = (abs: string, rel: string, stack: Rules[]) => {
    const own = rulesOf(abs, rel);
    const rules = own ? [...stack, own] : stack;
    for (const e of fs.readdirSync(abs, { withFileTypes: true }).sort((a, b) => byCodeUnit(a.name, b.name))) {
      const r = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.name === '.git') continue;
      if (ignored(rules, r, e.isDirectory())) continue;
      const p = path.join(abs, e.name);
      if (e.isDirectory()) {
        out.dirs.push(r);
        walk(p, r, rules);
      } else if (e.isFile()) {
        const s = fs.lstatSync(p);
        out.files.push({ rel: r, size: s.size, executable: (s.mode & 0o100) !== 0 });
        out.bytes += s.size;
      } else out.skipped.push(e.isSymbolicLink() ? `${r} (a symbolic link)` : r);
    }
  };
  walk(root, '', []);
  return out;
}

/** The one-line refusal of a snapshot over `limit` bytes, naming its largest files. */
export function overLimit(w: Walked, limit: number, root: string): string | null {
  if (w.bytes <= limit) return null;
  const largest = [...w.files].sort((a, b) => b.size - a.size || byCodeUnit(a.rel, b.rel)).slice(0, 3);
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `--code ${root}: ${mib(w.bytes)} in ${w.files.length} files is over the limit of ${mib(limit)} (--code-limit); the largest: ${largest.map((f) => `${f.rel} (${mib(f.size)})`).join(', ')}; leave files out with .gpuplaneignore or .gitignore`;
}

/** Writes `w`'s tar of `root` to `out` (a file); resolves with its sha256 and size. */
export async function packCode(root: string, w: Walked, out: string): Promise<{ sha256: string; bytes: number }> {
  const pack = tar.pack();
  const hash = createHash('sha256');
  let bytes = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      bytes += chunk.length;
      cb(null, chunk);
    },
  });
  const done = pipeline(pack, tap, fs.createWriteStream(out, { flags: 'wx', mode: 0o600 }));
  const fixed = { mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' };
  try {
    pack.entry({ ...fixed, name: `${CODE_TAR_ROOT}/`, type: 'directory', mode: 0o755 });
    const entries = [...w.dirs.map((d) => ({ rel: d, file: null as WalkedFile | null })), ...w.files.map((f) => ({ rel: f.rel, file: f }))].sort((a, b) => byCodeUnit(a.rel, b.rel));
    for (const { rel, file } of entries) {
      const name = `${CODE_TAR_ROOT}/${rel}`;
      if (!file) {
        pack.entry({ ...fixed, name: `${name}/`, type: 'directory', mode: 0o755 });
        continue;
      }
      const data = fs.readFileSync(path.join(root, ...rel.split('/')));
      if (data.length !== file.size) throw new Error(`--code ${root}: ${rel} changed while it was packed`);
      await new Promise<void>((resolve, reject) => pack.entry({ ...fixed, name, type: 'file', size: data.length, mode: file.executable ? 0o755 : 0o644 }, data, (err) => (err ? reject(err) : resolve())));
    }
    pack.finalize();
  } catch (err) {
    pack.destroy(err as Error);
    await done.catch(() => undefined);
    throw err;
  }
  await done;
  return { sha256: hash.digest('hex'), bytes };
}

/** The folder's git state: its checkout's HEAD and whether anything under the folder differs from it; null when it is no checkout (or git is not there). */
export async function gitStateOf(dir: string): Promise<{ commit: string; dirty: boolean } | null> {
  const git = (args: string[]) => promisify(execFile)('git', ['-C', dir, ...args], { timeout: 30_000, maxBuffer: 64 * 1024 * 1024 });
  try {
    const commit = (await git(['rev-parse', '--verify', '-q', 'HEAD'])).stdout.trim();
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) return null;
    const status = (await git(['status', '--porcelain', '--untracked-files=normal', '--', '.'])).stdout;
    return { commit, dirty: status.trim() !== '' };
  } catch {
    return null;
  }
}

export interface Snapshot {
  sha256: string;
  bytes: number;
  files: number;
  skipped: string[];
  /** The tar, in a folder of its own under the system's temporary folder: remove it with `dispose`. */
  file: string;
  git: { commit: string; dirty: boolean } | null;
  dispose: () => void;
}

/** Snapshots `dir` into a temporary tar; throws one line for a folder that is missing, not a folder, or over `limit` bytes. */
export async function snapshotCode(dir: string, limit: number): Promise<Snapshot> {
  const root = path.resolve(dir);
  const w = walkCode(root);
  const refused = overLimit(w, limit, dir);
  if (refused) throw new Error(refused);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuctl-code-'));
  const dispose = () => fs.rmSync(tmp, { recursive: true, force: true });
  try {
    const file = path.join(tmp, 'code.tar');
    const packed = await packCode(root, w, file);
    return { ...packed, files: w.files.length, skipped: w.skipped, file, git: await gitStateOf(root), dispose };
  } catch (err) {
    dispose();
    throw err;
  }
}
