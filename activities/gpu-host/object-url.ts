/**
 * One object read over HTTP(S) from a presigned URL, by a process that holds no credentials: the
 * checkpoint unpacker, running as the job's user, fetching the one object it unpacks
 * (checkpoint-unpack.ts says why). Plain `http.get`: no SDK, no retries; the agent's own path is
 * the fallback when this cannot reach the store.
 */
import http from 'node:http';
import https from 'node:https';

/** How long the connection may take to open, and to go quiet after. */
const CONNECT_MS = 5_000;
const IDLE_MS = 120_000;

/** A response that is not the object: no answer, or not 200. */
export class Unreached extends Error {}

/** The response body of a GET of `url` (200 only); rejects with Unreached, one line. */
export function openUrl(url: string): Promise<http.IncomingMessage> {
  const u = new URL(url);
  const get = u.protocol === 'https:' ? https.get : u.protocol === 'http:' ? http.get : null;
  if (!get) return Promise.reject(new Unreached(`not an http(s) URL (${u.protocol})`));
  return new Promise((resolve, reject) => {
    const silent = () => req.destroy(new Unreached(`no answer from ${u.host} within ${CONNECT_MS / 1000} s`));
    const req = get(u, { agent: false, timeout: CONNECT_MS }, (res) => {
      req.off('timeout', silent);
      if (res.statusCode === 200) {
        req.setTimeout(IDLE_MS, () => req.destroy(new Error(`the store went quiet for ${IDLE_MS / 1000} s`)));
        return resolve(res);
      }
      res.resume();
      reject(new Unreached(`the store answered ${res.statusCode} ${res.statusMessage ?? ''}`.trim()));
    });
    req.once('timeout', silent);
    req.once('error', (err) => reject(err instanceof Unreached ? err : new Unreached(`${u.host}: ${err.message.split('\n')[0]}`)));
  });
}
