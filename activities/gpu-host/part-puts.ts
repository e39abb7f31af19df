/**
 * The packer's own upload of its tar (checkpoint-upload.ts says why): each full part is PUT to a
 * presigned UploadPart URL that the agent mints for that part alone (its number, its length and
 * its CRC32 are signed in; runtime/s3-part-urls.ts), a few parts in flight while the next fills.
 * Plain `http.request`, as the unpacker's GET (object-url.ts): no SDK and no credentials here.
 *
 * A part that fails for a reason a wait can cure (no connection, a reset, a 5xx, throttling) is
 * PUT again with backoff, each time with a fresh URL (they live a minute), for up to `retryForMs`
 * from its first try: an S3 server away for 30 s costs the upload nothing, as the agent's own
 * retries had it (s3-retry.ts). Only the very first PUT decides whether the store is reachable
 * from here at all: if it fails, the packer gives up at once (`Unreached`) and the agent uploads
 * through its own client instead, with its own retries.
 */
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { Unreached } from './object-url.ts';
import { PartPool, type Fill, type TarSink } from './tar-sink.ts';

export interface PartPutOptions {
  /** Bytes per part (all but the last), and parts in flight while the next fills. */
  partSize: number;
  queueSize: number;
  /** How long one part keeps being tried, from its first PUT. */
  retryForMs: number;
  /** A URL that PUTs part `n`, `size` bytes whose CRC32 is `crc32` (the agent's answer). */
  urlFor(n: number, size: number, crc32: string): Promise<string>;
}

/** How long a connection may take to open, and a PUT to go quiet. */
const CONNECT_MS = 5_000;
const IDLE_MS = 120_000;

/** A PUT's outcome: the server's status (0: no answer) and, where it said, why; `reset`: the connection was cut while the body went. */
export interface Answer {
  status: number;
  why: string;
  reset?: boolean;
}

/**
 * A connection cut under the body is tried again only so many times in a row: a server that
 * refuses a request early (versitygw on a bad signature or an expired URL) answers and closes
 * before it has read the body, and the answer is often lost in the reset. A server going away
 * shows as refused connections instead, tried again for as long as `retryForMs`.
 */
const RESETS = 3;

const curable = (a: Answer, resets: number) => (a.status === 0 && (!a.reset || resets <= RESETS)) || a.status === 408 || a.status === 429 || a.status >= 500;

/**
 * One PUT of `body` to `url` (the part's length and CRC32 in its headers, as signed): the status
 * and a one-line reason. It asks first (`Expect: 100-continue`), so that a server that refuses the
 * request (a bad signature, an expired URL) says so before the body, rather than resetting the
 * connection under it, which would read as a server away; one that does not answer the ask
 * within a second gets the body anyway.
 */
export function putPart(url: string, body: Buffer, crc32: string, agents?: { http: http.Agent; https: https.Agent }): Promise<Answer> {
  const u = new URL(url);
  const request = u.protocol === 'https:' ? https.request : u.protocol === 'http:' ? http.request : null;
  if (!request) return Promise.resolve({ status: -1, why: `not an http(s) URL (${u.protocol})` });
  return new Promise((resolve) => {
    let answered: Answer | null = null;
    const headers = { 'content-length': body.length, 'x-amz-checksum-crc32': crc32, expect: '100-continue' };
    const req = request(u, { method: 'PUT', agent: agents ? (u.protocol === 'https:' ? agents.https : agents.http) : false, timeout: CONNECT_MS, headers }, (res) => {
      clearTimeout(ask);
      req.setTimeout(IDLE_MS);
      answered = { status: res.statusCode ?? 0, why: `the store answered ${res.statusCode} ${res.statusMessage ?? ''}`.trim() };
      let text = '';
      res.on('data', (c: Buffer) => void (text.length < 4096 && (text += c.toString())));
      res.on('end', () => {
        const code = /<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1];
        resolve({ status: answered!.status, why: `${answered!.why}${code ? ` (${code})` : ''}` });
        // A refusal before the body leaves the request unfinished: its connection is not reused.
        if (!sent) req.destroy();
      });
      res.on('error', () => resolve(answered!));
    });
    let sent = false;
    const send = () => {
      if (sent || answered) return;
      sent = true;
      clearTimeout(ask);
      req.end(body);
    };
    const ask = setTimeout(send, 1_000);
    req.once('continue', send);
    req.on('timeout', () => req.destroy(new Error(`no answer from ${u.host} within ${(answered ? IDLE_MS : CONNECT_MS) / 1000} s`)));
    req.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(ask);
      resolve(answered ?? { status: 0, why: `${u.host}: ${err.message.split('\n')[0]}`, reset: sent && (err.code === 'ECONNRESET' || err.code === 'EPIPE') });
    });
  });
}

/** A sink that PUTs each part to its presigned URL; `parts` and `bytes` count what was given. */
export function partPuts(o: PartPutOptions): TarSink & { readonly parts: number; readonly bytes: number } {
  const pool = new PartPool(o.partSize, o.queueSize + 1, true);
  const agents = { http: new http.Agent({ keepAlive: true, maxSockets: o.queueSize }), https: new https.Agent({ keepAlive: true, maxSockets: o.queueSize }) };
  const inflight = new Set<Promise<void>>();
  let failure: Error | null = null;
  let reached = false;
  let parts = 0;
  let bytes = 0;

  async function put(n: number, part: Fill): Promise<void> {
    const body = part.buf.subarray(0, part.filled);
    const crc32 = part.crc32();
    const firstAt = Date.now();
    let resets = 0;
    for (let tries = 1; ; tries++) {
      if (failure) return;
      const a = await putPart(await o.urlFor(n, body.length, crc32), body, crc32, agents);
      if (a.status === 200) return void (reached = true);
      if (!reached && n === 1 && tries === 1) throw new Unreached(a.why);
      resets = a.reset ? resets + 1 : 0;
      const wait = Math.random() * Math.min(5_000, 200 * 2 ** (tries - 1));
      if (!curable(a, resets) || Date.now() + wait - firstAt > o.retryForMs) throw new Error(`part ${n}: ${a.why}${tries > 1 ? ` (after ${tries} tries in ${Math.round((Date.now() - firstAt) / 1000)} s)` : ''}`);
      await sleep(wait);
    }
  }

  return {
    get parts() {
      return parts;
    },
    get bytes() {
      return bytes;
    },
    take: () => pool.take(() => failure),
    async give(part) {
      const n = ++parts;
      bytes += part.filled;
      const p = put(n, part)
        .catch((err: Error) => void (failure ??= err))
        .finally(() => {
          inflight.delete(p);
          pool.back(part.buf);
        });
      inflight.add(p);
    },
    async done() {
      try {
        while (inflight.size) await Promise.all(inflight);
        if (failure) throw failure;
      } finally {
        agents.http.destroy();
        agents.https.destroy();
      }
    },
    fail(err) {
      failure ??= err;
      pool.wake();
    },
  };
}
