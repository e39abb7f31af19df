/**
 * `--code DIR` on gpuctl's side: snapshot the folder (code-snapshot.ts), ask the API whether the
 * project has it (HEAD /code/:sha256), upload it only when not (PUT, streamed from the tar, with
 * progress on a terminal), and answer what a submit, a retry, a fork or a sweep names it by.
 */
import fs from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { DEFAULT_CODE_LIMIT_BYTES, MAX_CODE_UPLOAD_BYTES, type CodeRef } from '../domain/code-snapshot.ts';
import { ApiError, type GpuplaneClient } from './client.ts';
import { snapshotCode } from './code-snapshot.ts';

const qs = (project: string | undefined) => (project ? `?project=${encodeURIComponent(project)}` : '');
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** Whether the project (none: the jobs of no project) has the snapshot `sha256`. */
export async function hasCode(c: GpuplaneClient, sha256: string, project: string | undefined): Promise<boolean> {
  try {
    await c.exchange('HEAD', `/code/${sha256}${qs(project)}`);
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return false;
    throw err;
  }
}

/** PUTs the tar `file` as the project's snapshot `sha256`; `progress` hears the bytes sent. */
export async function putCode(c: GpuplaneClient, sha256: string, project: string | undefined, file: string, progress?: (sent: number) => void): Promise<void> {
  let sent = 0;
  const counted = fs.createReadStream(file).pipe(
    new Transform({
      transform(chunk: Buffer, _enc, cb) {
        sent += chunk.length;
        progress?.(sent);
        cb(null, chunk);
      },
    }),
  );
  let res: Response;
  try {
    res = await fetch(`${c.baseUrl.replace(/\/$/, '')}/api/v1/code/${sha256}${qs(project)}`, {
      method: 'PUT',
      headers: { ...c.authHeaders(), 'content-type': 'application/x-tar', 'content-length': String(fs.statSync(file).size) },
      body: Readable.toWeb(counted) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
  } catch (err) {
    throw new ApiError(0, 'unreachable', `cannot reach the GPUPlane API at ${c.baseUrl} (${(err as Error).cause ?? (err as Error).message}) to upload the code`);
  }
  if (res.ok) return void (await res.arrayBuffer());
  const e = ((await res.json().catch(() => ({}))) ?? {}) as { error?: string; message?: string };
  throw new ApiError(res.status, e.error ?? 'error', e.message ?? `HTTP ${res.status}`);
}

/**
 * The snapshot of `dir` in the project's store, uploaded when it is not there yet; what a submit
 * names it by. Says on `say` (stderr) what it did. Throws one line before anything is sent for a
 * folder that is missing, not a folder, or over `limit` bytes.
 */
export async function codeFor(c: GpuplaneClient, dir: string, o: { project?: string; limit: number; say: (line: string) => void }): Promise<CodeRef> {
  const snap = await snapshotCode(dir, o.limit);
  try {
    if (snap.skipped.length) o.say(`gpuctl: --code ${dir}: left out ${snap.skipped.length} that ${snap.skipped.length === 1 ? 'is' : 'are'} not a regular file or folder: ${snap.skipped.slice(0, 5).join(', ')}${snap.skipped.length > 5 ? ', …' : ''}`);
    const what = `code ${snap.sha256.slice(0, 12)} (${snap.files} files, ${mib(snap.bytes)})`;
    if (await hasCode(c, snap.sha256, o.project)) o.say(`gpuctl: ${what} is in the store already`);
    else {
      // A line a second on a terminal while a long upload goes.
      let last = 0;
      const tty = process.stderr.isTTY;
      await putCode(c, snap.sha256, o.project, snap.file, (sent) => {
        if (!tty || Date.now() - last < 1000) return;
        last = Date.now();
        process.stderr.write(`\rgpuctl: uploading ${what}: ${mib(sent)} `);
      });
      if (tty && last) process.stderr.write('\n');
      o.say(`gpuctl: ${what} uploaded`);
    }
    return { sha256: snap.sha256, ...(snap.git ? { git: snap.git } : {}) };
  } finally {
    snap.dispose();
  }
}

/** `--code-limit`: bytes, with an optional unit K, M or G (powers of 1024), at most what the API takes. */
export function byteSizeArg(flag: string): (v: string) => number {
  return (v: string) => {
    const m = /^([0-9]+(?:\.[0-9]+)?)([KMG])?$/i.exec(v.trim());
    const n = m ? Math.floor(Number(m[1]) * 1024 ** { '': 0, K: 1, M: 2, G: 3 }[(m[2] ?? '').toUpperCase() as '' | 'K' | 'M' | 'G']) : NaN;
    if (!Number.isFinite(n) || n < 1 || n > MAX_CODE_UPLOAD_BYTES) throw new InvalidArgumentError(`${flag} must be a size from 1 byte to 4G (bytes, or with K, M or G: 500K, 50M, 1G)`);
    return n;
  };
}

/** Adds --code and --code-limit to a command (submit, retry, fork); `what` names the job or attempt that runs the code. */
export function addCodeOptions(c: Command, what: string): Command {
  return c
    .option('--code <dir>', `snapshot this folder (less what its .gitignore and .gpuplaneignore files leave out, and .git), upload it once, and run ${what} in a copy of it on its node (docs/storage.md)`)
    .addOption(new Option('--code-limit <size>', 'refuse a --code snapshot larger than this, naming its largest files (bytes, or 500K, 50M, 1G)').argParser(byteSizeArg('--code-limit')).default(DEFAULT_CODE_LIMIT_BYTES, `${DEFAULT_CODE_LIMIT_BYTES / 1024 / 1024}M`));
}

/** --code with --workdir: one line, before anything is sent. */
export function refuseCodeWithWorkdir(o: { code?: string; workdir?: string }): void {
  if (o.code && o.workdir) throw new InvalidArgumentError('--code and --workdir: a job with --code runs in its copy of the folder on its node; give one of them');
}

/**
 * The `code` of a request for addCodeOptions' options: none without --code, else codeFor's
 * snapshot of the folder in `project` (asked only then: a retry or fork reads it from the API),
 * said on stderr.
 */
export async function codeOption(c: GpuplaneClient, o: { code?: string; codeLimit: number }, project: () => Promise<string | null | undefined>): Promise<{ code?: CodeRef }> {
  if (!o.code) return {};
  return { code: await codeFor(c, o.code, { project: (await project()) ?? undefined, limit: o.codeLimit, say: (l) => process.stderr.write(`${l}\n`) }) };
}
