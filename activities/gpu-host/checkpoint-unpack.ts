/**
 * How a stored checkpoint's bytes reach the unpacker (checkpoint-packer.ts `unpack`), the process
 * that writes them into a node's cache as the job's user (checkpoint-fetch.ts): straight from the
 * store where it serves HTTP, else piped in by the agent.
 */
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ObjectStore } from '../../runtime/object-store.ts';
import type { PackerResult } from './checkpoint-packer.ts';
import type { RunAs } from './checkpoint-scanner.ts';
import { startPacker } from './packer-client.ts';

/** How long a presigned URL given to the unpacker opens its object: it is used once, at its start. */
const URL_FOR_S = 60;

/**
 * Unpacks the object `key` into `dest` as `user`; the packer's answer, and how it came. Where the
 * store serves HTTP, the unpacker GETs the object itself from a presigned URL for that one object
 * (on its stdin), so the bytes skip the agent: the agent's GET and its pipe into the unpacker cost
 * more CPU than the unpacking (docs/benchmarks.md). The URL reads only what the job's user is
 * about to be given, for a minute (docs/storage.md). An unpacker that cannot reach the store
 * (no route or a firewall for the job's uid, a TLS authority only the agent trusts, any answer
 * but 200) wrote nothing: the agent then fetches through its own client, as before, with its
 * retries and its error lines; so it does where no URL could be made.
 */
export async function unpackStored(store: ObjectStore, key: string, dest: string, user: RunAs | null): Promise<{ result: PackerResult; unreached?: string }> {
  const url = await store.presign?.(key, URL_FOR_S).catch((err: Error) => new Error(`no URL: ${err.message.split('\n')[0]}`));
  if (url instanceof Error) return { result: await unpackPiped(store, key, dest, user), unreached: url.message };
  if (url) {
    const { child, done } = startPacker({ mode: 'unpack', dest, user, from: 'url' });
    child.stdin!.end(url);
    const { result } = await done;
    if (result?.t !== 'unreached') return { result: result ?? { t: 'error', msg: 'the unpacker said nothing' } };
    fs.rmSync(dest, { recursive: true, force: true });
    return { result: await unpackPiped(store, key, dest, user), unreached: result.msg };
  }
  return { result: await unpackPiped(store, key, dest, user) };
}

/** Unpacks the object `key` into `dest` as `user`, the agent piping the bytes in; the packer's answer. */
async function unpackPiped(store: ObjectStore, key: string, dest: string, user: RunAs | null): Promise<PackerResult> {
  const refused = (err: unknown): PackerResult => ({ t: 'error', msg: `the store: ${(err as Error).message.split('\n')[0]}` });
  let body: Readable;
  try {
    body = await store.get(key);
  } catch (err) {
    return refused(err);
  }
  const { child, done } = startPacker({ mode: 'unpack', dest, user });
  let failed: PackerResult | null = null;
  await pipeline(body, child.stdin!).catch((err: unknown) => {
    child.kill('SIGKILL');
    failed = refused(err);
  });
  const { result } = await done;
  return failed ?? result ?? { t: 'error', msg: 'the unpacker said nothing' };
}
