/**
 * One checkpoint into the store (checkpoint-upload.ts queues them): packed as a tar by a process
 * of the job's user (checkpoint-packer.ts), hashed in the same pass, and checked against the
 * registered fingerprint; a copy that is not the registered checkpoint is deleted and reported.
 *
 * Where the store serves HTTP, the packer PUTs the parts itself, each to a presigned URL that the
 * agent mints for that part alone (runtime/s3-part-urls.ts), so the bytes skip the agent: the
 * hop through it (the packer's writes, the agent's reads and copies) and the SHA-256 that a signed
 * payload costs over plain HTTP were most of the CPU an upload cost beyond the AWS CLI's
 * (docs/benchmarks.md). The agent keeps the rest: it creates the multipart upload, mints each URL
 * on the packer's ask (one key, one upload id, one part number, the part's length and CRC32, a
 * minute), and completes the upload only once the server's own list of parts is exactly what it
 * minted. What that lends the job's user: docs/storage.md, "The one write a job's user is lent".
 * A packer whose first PUT finds no store (no route or a firewall for the job's uid, a TLS
 * authority only the agent trusts, any answer but 200) is given up at once, the upload aborted:
 * the agent then uploads through its own client, with its retries, the packer writing the tar to
 * it; so it does where no upload could be made, and on a folder store.
 */
import readline from 'node:readline';
import type { ObjectStore, PartUrls } from '../../runtime/object-store.ts';
import { ChildOutput } from '../../runtime/child-output.ts';
import type { PackerResult, UrlAnswer, UrlAsk } from './checkpoint-packer.ts';
import type { RunAs } from './checkpoint-scanner.ts';
import { startPacker, type PackerRun } from './packer-client.ts';

/** How long a part's URL PUTs: it is used at once, and asked for again on a retry. */
const URL_FOR_S = 60;
/** Parts in flight while the next fills; how long one part keeps being tried (as the agent's own requests, s3-store.ts). */
const QUEUE_SIZE = 3;
const RETRY_FOR_MS = 120_000;

export interface Uploaded {
  fingerprint: string;
  sizeBytes: number;
  storedBytes: number;
  /** Why the packer's own PUTs were not used (it could not reach the store; no URLs), where they were not. */
  unreached?: string;
}

export interface UploadArgs {
  key: string;
  path: string;
  fingerprint: string;
  user: RunAs | null;
}

/** Why the packer's answer is not the registered checkpoint packed whole, or null. */
function refusal(r: PackerResult | null, said: string[], code: number | null, fingerprint: string): string | null {
  if (!r || code !== 0) return `packing it failed: ${r?.t === 'error' || r?.t === 'unreached' ? r.msg : (said.at(-1) ?? `the packer exited ${code}`)}`;
  if (r.t === 'packed' && r.fingerprint !== fingerprint) return `its files changed after it was registered (now ${r.fingerprint})`;
  return r.t === 'packed' ? null : 'packing it failed';
}

/**
 * Packs the checkpoint at `path` as `user` into the store under `key`; resolves once the object is
 * whole and its hash is `fingerprint`. Throws one line otherwise (nothing is then left stored).
 */
export async function uploadCheckpoint(store: ObjectStore, a: UploadArgs): Promise<Uploaded> {
  const urls = await store.partUrls?.(a.key, URL_FOR_S).catch((err: Error) => new Error(`no upload for the packer: ${err.message.split('\n')[0]}`));
  if (!urls) return uploadPiped(store, a);
  if (urls instanceof Error) return { ...(await uploadPiped(store, a)), unreached: urls.message };
  const direct = await uploadByUrls(urls, a);
  return 'unreached' in direct ? { ...(await uploadPiped(store, a)), unreached: direct.unreached } : direct;
}

/** Answers the packer's asks for part URLs, each a URL of `urls` for the part it names. */
function serveUrls(run: PackerRun, urls: PartUrls): void {
  const answer = (a: UrlAnswer) => run.child.stdin!.write(`${JSON.stringify(a)}\n`);
  readline.createInterface({ input: run.child.stdout! }).on('line', (line) => {
    let ask: UrlAsk;
    try {
      ask = JSON.parse(line) as UrlAsk;
    } catch {
      return void run.child.kill('SIGKILL');
    }
    urls.url(ask.n, ask.size, ask.crc32).then(
      (url) => answer({ id: ask.id, url }),
      (err: Error) => answer({ id: ask.id, error: err.message.split('\n')[0] }),
    );
  });
}

/** The packer PUTs the parts; the agent completes the upload once the server holds exactly what it minted. */
async function uploadByUrls(urls: PartUrls, a: UploadArgs): Promise<Uploaded | { unreached: string }> {
  const run = startPacker({ mode: 'pack', path: a.path, user: a.user, urls: { partSize: urls.partSize, queueSize: QUEUE_SIZE, retryForMs: RETRY_FOR_MS } });
  serveUrls(run, urls);
  const { result: r, said, code } = await run.done;
  if (r?.t === 'unreached') {
    await urls.abort();
    return { unreached: r.msg };
  }
  let why = refusal(r, said, code, a.fingerprint);
  if (!why && r?.t === 'packed') {
    try {
      const info = await urls.complete(r.parts ?? 0, r.tarBytes ?? 0);
      return { fingerprint: r.fingerprint, sizeBytes: r.sizeBytes, storedBytes: info.size };
    } catch (err) {
      why = `the store refused it: ${(err as Error).message.split('\n')[0]}`;
    }
  }
  await urls.abort();
  throw new Error(why ?? 'packing it failed');
}

/** The packer writes the tar to the agent, which uploads it through its own client. */
async function uploadPiped(store: ObjectStore, a: UploadArgs): Promise<Uploaded> {
  // The tar comes over a socket read into one reused buffer (runtime/child-output.ts), not a pipe.
  const { output, childEnd } = await ChildOutput.open();
  const { child, done } = startPacker({ mode: 'pack', path: a.path, user: a.user }, childEnd);
  childEnd.destroy();
  let info: Awaited<ReturnType<ObjectStore['put']>> | null = null;
  let putError: Error | null = null;
  try {
    info = await store.put(a.key, output);
  } catch (err) {
    putError = err as Error;
    child.kill('SIGKILL');
  } finally {
    output.destroy();
  }
  const { result: r, said, code } = await done;
  const why = putError ? `the store refused it: ${putError.message.split('\n')[0]}` : refusal(r, said, code, a.fingerprint);
  if (why || !info || r?.t !== 'packed') {
    await store.delete({ keys: [a.key] }).catch(() => undefined);
    throw new Error(why ?? 'packing it failed');
  }
  return { fingerprint: r.fingerprint, sizeBytes: r.sizeBytes, storedBytes: info.size };
}
