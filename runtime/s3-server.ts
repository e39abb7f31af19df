import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { s3Client } from './s3-client.ts';

const buildScript = fileURLToPath(new URL('../scripts/versitygw.sh', import.meta.url));

/** The versitygw binary: built once into the per-user tools cache (scripts/versitygw.sh), go's output on stderr. */
export function versitygwBinary(): string {
  return execFileSync('bash', [buildScript], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface S3ServerOptions {
  /** The server's folder: objects under `data/` (a folder per bucket), their metadata under `meta/`. */
  dir: string;
  port: number;
  /** Where it listens (default 127.0.0.1); 0.0.0.0 to be reachable from isolated nodes' namespaces. */
  host?: string;
  /** The host in `endpoint` (default: `host`, or 127.0.0.1 when that is 0.0.0.0). */
  advertiseHost?: string;
  accessKeyId: string;
  secretAccessKey: string;
  region?: string;
  /** Buckets made at each start when missing. */
  buckets?: readonly string[];
  /** Its stdout and stderr, appended; else dropped. */
  logFile?: string;
}

export interface S3Server {
  /** `http://host:port`: GPUPLANE_S3_ENDPOINT. */
  readonly endpoint: string;
  readonly region: string;
  readonly running: boolean;
  /** Starts it again on the same port and folder after `stop`; resolves once it answers. */
  start(): Promise<void>;
  /** Stops it (SIGKILL after 10 s); SIGKILL at once to cut it off mid-request. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** The variables a GPUPlane process needs to use it: GPUPLANE_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION. */
  env(): Record<string, string>;
}

const bracketed = (host: string) => (host.includes(':') ? `[${host}]` : host);

/**
 * Starts versitygw (github.com/versity/versitygw, Apache-2.0) in its POSIX mode on a folder: a
 * real S3 server for the tests and `gpuctl up --storage s3`. Metadata goes to a sidecar folder
 * rather than extended attributes, so any filesystem will do (tmpfs and overlayfs included).
 * Resolves once it answers HTTP and its buckets exist.
 */
export async function startS3Server(o: S3ServerOptions): Promise<S3Server> {
  const bin = versitygwBinary();
  const host = o.host ?? '127.0.0.1';
  const region = o.region ?? 'us-east-1';
  const endpoint = `http://${bracketed(o.advertiseHost ?? (host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host))}:${o.port}`;
  const data = path.join(o.dir, 'data');
  const meta = path.join(o.dir, 'meta');
  fs.mkdirSync(data, { recursive: true, mode: 0o700 });
  fs.mkdirSync(meta, { recursive: true, mode: 0o700 });
  const args = ['--port', `${bracketed(host)}:${o.port}`, '--region', region, '--quiet', 'posix', '--sidecar', meta, data];
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  async function start(): Promise<void> {
    if (child) return;
    const out = o.logFile ? fs.openSync(o.logFile, 'a') : 'ignore';
    // The keys by environment, not argv, where `ps` would show them. Its own process group, like Temporal's dev server.
    const c = spawn(bin, args, {
      cwd: o.dir,
      stdio: ['ignore', out, out],
      detached: true,
      env: { ...process.env, ROOT_ACCESS_KEY_ID: o.accessKeyId, ROOT_SECRET_ACCESS_KEY: o.secretAccessKey },
    });
    if (typeof out === 'number') fs.closeSync(out);
    child = c;
    exited = new Promise<void>((r) => c.once('exit', () => r()));
    const early = exited.then(() => {
      throw new Error(`versitygw on ${endpoint} exited at start${o.logFile ? `: ${lastLine(o.logFile)} (see ${o.logFile})` : ''}`);
    });
    try {
      await Promise.race([answers(endpoint, 30_000), early]);
      await makeBuckets(endpoint, region, o);
    } catch (err) {
      c.kill('SIGKILL');
      await exited;
      child = null;
      throw err;
    }
    void exited.then(() => {
      if (child === c) child = null;
    });
  }

  async function stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const c = child;
    if (!c) return;
    if (c.exitCode === null && c.signalCode === null) {
      c.kill(signal);
      const t = setTimeout(() => c.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    }
    child = null;
  }

  await start();
  return {
    endpoint,
    region,
    get running() {
      return child !== null;
    },
    start,
    stop,
    env: () => ({ GPUPLANE_S3_ENDPOINT: endpoint, AWS_ACCESS_KEY_ID: o.accessKeyId, AWS_SECRET_ACCESS_KEY: o.secretAccessKey, AWS_REGION: region }),
  };
}

/** Resolves once `endpoint` answers HTTP at all (an unsigned request gets a 403: it is up). */
async function answers(endpoint: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(endpoint, { signal: AbortSignal.timeout(1000) });
      await res.body?.cancel();
      return;
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`versitygw on ${endpoint} did not answer within ${timeoutMs} ms: ${String(last)}`);
}

async function makeBuckets(endpoint: string, region: string, o: S3ServerOptions): Promise<void> {
  if (!o.buckets?.length) return;
  const client = s3Client({ endpoint, region, credentials: { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey } });
  try {
    for (const Bucket of o.buckets) {
      await client.send(new CreateBucketCommand({ Bucket })).catch((err: Error) => {
        if (err.name !== 'BucketAlreadyOwnedByYou' && err.name !== 'BucketAlreadyExists') throw err;
      });
    }
  } finally {
    client.destroy();
  }
}

function lastLine(file: string): string {
  try {
    const last = fs.readFileSync(file, 'utf8').trimEnd().split('\n').at(-1) ?? '';
    return last.length > 300 ? `${last.slice(0, 300)}…` : last || '(its log is empty)';
  } catch {
    return '(no log)';
  }
}
