/**
 * A job's code snapshot on the node that runs an attempt of it (issue 44, docs/storage.md "Code
 * snapshots"). Before the process starts, the agent fetches the tar into a node-local cache by its
 * hash (from the plane's store, or through the API where the agent has no store of its own),
 * checking the sha256 of every byte; then a packer that takes the job's user (checkpoint-packer.ts
 * `unpack`: only files and folders, each created anew, nothing through a link) unpacks it into the
 * job's own working dir (domain/code-snapshot.ts codeWorkingDir), which becomes the process's cwd.
 * A later attempt of the same job and code on the same node finds that folder and works in it as
 * it was left (its checkpoints are there); a retry with other code gets a folder of its own.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { CODE_TAR_ROOT, CODE_WORK_ROOT, codeWorkingDir } from '../../domain/code-snapshot.ts';
import type { ObjectStore } from '../../runtime/object-store.ts';
import type { AttemptSpec } from '../../workflows/types.ts';
import type { RunAs } from './checkpoint-scanner.ts';
import { attemptUrl } from './launch.ts';
import { startPacker } from './packer-client.ts';

/** Where a node keeps the tars it fetched (GPUPLANE_CODE_CACHE_DIR): only the agent reads them. */
export function codeCacheDirFromEnv(nodeId: string, env = process.env): string {
  return env.GPUPLANE_CODE_CACHE_DIR?.trim() || path.join('/var/tmp/gpuplane-code-cache', nodeId);
}

/** The cache's bound in bytes (GPUPLANE_CODE_CACHE_GB, 10). */
export function codeCacheBytesFromEnv(env = process.env): number {
  const gb = Number(env.GPUPLANE_CODE_CACHE_GB ?? 10);
  return (Number.isFinite(gb) && gb > 0 ? gb : 10) * 1024 ** 3;
}

/** Where the bytes come from: the plane's store, or the API (GET /jobs/:id/attempts/:n/code with the node token). */
export interface CodeSource {
  store: ObjectStore | null;
  api: { apiUrl: string; nodeId: string; nodeToken?: string };
}

type Spec = Pick<AttemptSpec, 'jobId' | 'attempt' | 'workingDir' | 'code'>;
type Note = (message: string, level: 'info' | 'warning') => Promise<void>;

/** The tar's files whose owner may execute them (0755 in a snapshot), by their names in it. */
async function executablesOf(file: string): Promise<string[]> {
  const names: string[] = [];
  const extract = tar.extract();
  const fed = pipeline(fs.createReadStream(file), extract);
  for await (const entry of extract) {
    if (entry.header.type === 'file' && ((entry.header.mode ?? 0) & 0o100) !== 0) names.push(entry.header.name);
    entry.resume();
  }
  await fed;
  return names;
}

/**
 * Gives the unpacked files that were executable in the snapshot their x bit back (the unpacker
 * makes every file 0600): `chmod u+x` as the job's user, in the folder unpacked, so it changes
 * nothing that user could not change itself.
 */
async function markExecutable(file: string, dir: string, user: RunAs | null): Promise<void> {
  const names = await executablesOf(file);
  for (let i = 0; i < names.length; i += 500) {
    const child = spawn('chmod', ['u+x', '--', ...names.slice(i, i + 500)], { cwd: dir, env: { PATH: '/usr/bin:/bin', LANG: 'C' }, stdio: ['ignore', 'ignore', 'pipe'], ...(user ? { uid: user.uid, gid: user.gid } : {}) });
    let said = '';
    child.stderr.on('data', (d: Buffer) => (said += d.toString()));
    const code = await new Promise<number | null>((resolve) => {
      child.once('error', () => resolve(null));
      child.once('close', resolve);
    });
    if (code !== 0) throw new Error(`chmod u+x of its executable files failed: ${said.trim().split('\n')[0] || `exit ${code}`}`);
  }
}

/** A folder of the agent's own (made 0700 or `mode`); one that is a link or another user's is refused. */
function ownFolder(dir: string, mode: number, what: string): void {
  fs.mkdirSync(dir, { recursive: true, mode });
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? st.uid)) throw new Error(`${what} ${dir} is not a folder of the agent's own`);
  fs.chmodSync(dir, mode);
}

/** The jobs whose code this process is making ready now: the node's sweep of unpacked code (code-workdirs.ts) leaves them alone. */
export const codeInPreparation = new Set<string>();

export class CodeCache {
  constructor(
    private readonly root: string,
    private readonly source: CodeSource,
    private readonly maxBytes = codeCacheBytesFromEnv(),
  ) {}

  /**
   * Makes the attempt's working dir, its code unpacked in it as `user`; null when it is ready, or
   * why not in one line. Says in the attempt's events what it fetched, or that the cache had it.
   */
  async prepare(spec: Spec, user: RunAs | null, note: Note): Promise<string | null> {
    const code = spec.code!;
    const want = codeWorkingDir(spec.jobId, code.sha256);
    if (spec.workingDir !== want) return `working dir ${spec.workingDir} is not the one of the job's code (${want})`;
    const owner = user?.uid ?? process.getuid?.() ?? 0;
    codeInPreparation.add(spec.jobId);
    try {
      const there = fs.lstatSync(want, { throwIfNoEntry: false });
      if (there) {
        if (!there.isDirectory() || there.uid !== owner) return `working dir ${want} is there but is not the job user's folder`;
        await note(`code ${code.sha256.slice(0, 12)} is unpacked in ${want} already (an earlier attempt on this node): the process works in it as it was left`, 'info').catch(() => undefined);
        return null;
      }
      const started = Date.now();
      const got = await this.tar(spec);
      const dest = await this.unpack(spec.jobId, code.sha256, got.file, user);
      const took = `${((Date.now() - started) / 1000).toFixed(1)} s`;
      const from = got.fetched ? `fetched from ${this.source.store ? 'the store' : 'the API'} (${got.bytes} bytes)` : "in this node's cache";
      await note(`code ${code.sha256.slice(0, 12)} ${from}, unpacked into ${dest} in ${took}`, 'info').catch(() => undefined);
      return null;
    } catch (err) {
      const why = `the job's code ${code.sha256.slice(0, 12)} could not be made ready: ${(err as Error).message.split('\n')[0]}`;
      await note(why, 'warning').catch(() => undefined);
      return why;
    } finally {
      codeInPreparation.delete(spec.jobId);
    }
  }

  /** The cached tar of the attempt's code, fetched and checked against its sha256 when it is not there. */
  async tar(spec: Spec): Promise<{ file: string; fetched: boolean; bytes: number }> {
    const { key, sha256 } = spec.code!;
    ownFolder(this.root, 0o700, 'the code cache (GPUPLANE_CODE_CACHE_DIR)');
    const file = path.join(this.root, `${sha256}.tar`);
    if (fs.existsSync(file)) {
      const now = new Date();
      fs.utimesSync(file, now, now);
      return { file, fetched: false, bytes: fs.statSync(file).size };
    }
    const tmp = path.join(this.root, `.${sha256}.${randomBytes(6).toString('hex')}`);
    const hash = createHash('sha256');
    let bytes = 0;
    const count = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        hash.update(chunk);
        cb(null, chunk);
      },
    });
    try {
      await pipeline(await this.open(spec, key), count, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
      const got = hash.digest('hex');
      if (got !== sha256) throw new Error(`the copy fetched hashes to ${got}, not ${sha256}`);
      fs.renameSync(tmp, file);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    this.prune(file);
    return { file, fetched: true, bytes };
  }

  /** The tar's bytes: from the store, or the API's node route. */
  private async open(spec: Spec, key: string): Promise<Readable> {
    if (this.source.store) return this.source.store.get(key);
    const { api } = this.source;
    if (!api.nodeToken) throw new Error('this agent has neither the plane\'s store nor a node token to fetch code through the API with');
    const res = await fetch(attemptUrl(api, spec, 'code'), { headers: { authorization: `Bearer ${api.nodeToken}` } });
    if (!res.ok || !res.body) {
      const body = (await res.json().catch(() => ({}))) as { message?: string };
      throw new Error(`the API answered ${res.status}${body.message ? `: ${body.message}` : ''}`);
    }
    return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
  }

  /** Unpacks the tar as `user` into the job's folder for this code; the working dir. */
  private async unpack(jobId: string, sha256: string, tarFile: string, user: RunAs | null): Promise<string> {
    ownFolder(CODE_WORK_ROOT, 0o711, 'the code folder');
    const jobDir = path.join(CODE_WORK_ROOT, jobId);
    if (!fs.existsSync(jobDir)) {
      fs.mkdirSync(jobDir, { mode: 0o700 });
      if (user) fs.chownSync(jobDir, user.uid, user.gid);
    }
    const st = fs.lstatSync(jobDir);
    if (!st.isDirectory() || st.uid !== (user?.uid ?? process.getuid?.() ?? st.uid)) throw new Error(`${jobDir} is not the job user's folder`);
    const final = path.dirname(codeWorkingDir(jobId, sha256));
    const tmp = path.join(jobDir, `.unpack-${randomBytes(6).toString('hex')}`);
    const { child, done } = startPacker({ mode: 'unpack', dest: tmp, user });
    let failed: string | null = null;
    await pipeline(fs.createReadStream(tarFile), child.stdin!).catch((err: unknown) => {
      child.kill('SIGKILL');
      failed = (err as Error).message;
    });
    const { result, said } = await done;
    const r = result;
    if (failed || r?.t !== 'packed' || r.path !== path.join(tmp, CODE_TAR_ROOT)) {
      fs.rmSync(tmp, { recursive: true, force: true });
      throw new Error(failed ?? (r?.t === 'error' ? r.msg : r ? `the tar's top folder is not ${CODE_TAR_ROOT}/` : `the unpacker said nothing${said.length ? ` (${said.at(-1)})` : ''}`));
    }
    try {
      await markExecutable(tarFile, tmp, user);
      fs.renameSync(tmp, final);
    } catch (err) {
      // Another attempt's unpack of the same code came first (that one is used), or the modes could not be set.
      fs.rmSync(tmp, { recursive: true, force: true });
      if (!fs.existsSync(final)) throw err;
    }
    return path.join(final, CODE_TAR_ROOT);
  }

  /** Removes the least recently used tars (never `keep`) while the cache holds more than its bound. */
  private prune(keep: string): void {
    const tars = fs
      .readdirSync(this.root)
      .filter((n) => n.endsWith('.tar') && !n.startsWith('.'))
      .map((n) => {
        const st = fs.statSync(path.join(this.root, n));
        return { file: path.join(this.root, n), used: st.mtimeMs, bytes: st.size };
      });
    let total = tars.reduce((n, t) => n + t.bytes, 0);
    for (const t of tars.sort((a, b) => a.used - b.used)) {
      if (total <= this.maxBytes) break;
      if (t.file === keep) continue;
      fs.rmSync(t.file, { force: true });
      total -= t.bytes;
    }
  }
}
