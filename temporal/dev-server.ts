import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import { temporalSecurityFromEnv, type TemporalSecurity } from './security.ts';

const ensureScript = fileURLToPath(new URL('./ensure-temporal.sh', import.meta.url));

/** The Temporal CLI binary: from PATH, or built once into the per-user cache. */
export function temporalBinary(): string {
  return execFileSync('bash', [ensureScript], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface DevServerOptions {
  dbFile: string;
  port: number;
  uiPort: number | null;
  ip?: string;
  /** Where the UI listens (default: ip). `gpuctl up` puts it on loopback behind its guarding proxy. */
  uiIp?: string;
  namespaces?: string[];
  logFile?: string;
  /** Port of its Prometheus `/metrics` endpoint (random when unset). */
  metricsPort?: number;
  /** More dynamic config values (`frontend.namespaceCount: 10000`, …). */
  dynamicConfig?: Record<string, string | number | boolean>;
}

export interface DevServer {
  address: string;
  uiUrl: string | null;
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function devServerArgs(o: DevServerOptions): string[] {
  const ip = o.ip ?? '127.0.0.1';
  const args = ['server', 'start-dev', '--db-filename', o.dbFile, '--ip', ip, '--port', String(o.port), '--log-level', 'warn'];
  args.push(...(o.uiPort === null ? ['--headless'] : ['--ui-port', String(o.uiPort), ...(o.uiIp ? ['--ui-ip', o.uiIp] : [])]));
  for (const ns of o.namespaces ?? []) args.push('--namespace', ns);
  if (o.metricsPort !== undefined) args.push('--metrics-port', String(o.metricsPort));
  for (const sa of SEARCH_ATTRIBUTES) args.push('--search-attribute', `${sa.name}=Keyword`);
  // WAL with synchronous=NORMAL: a killed server loses nothing (the WAL survives a process
  // crash); only a power loss can drop the last transactions. Several times the throughput.
  args.push('--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=1');
  // These machines have no internet: skip the version check that would call home.
  args.push('--dynamic-config-value', 'frontend.enableServerVersionCheck=false');
  for (const [k, v] of Object.entries(o.dynamicConfig ?? {})) args.push('--dynamic-config-value', `${k}=${JSON.stringify(v)}`);
  return args;
}

export async function waitForTemporal(address: string, timeoutMs = 60_000, security: TemporalSecurity = temporalSecurityFromEnv()): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1000, ...security });
      await conn.workflowService.getSystemInfo({});
      await conn.close();
      return;
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`Temporal at ${address} did not answer within ${timeoutMs} ms: ${String(last)}`);
}

/** The last line of a log that says something, cut to 300 characters: why a server stopped, in the error that says it did. */
function logTail(file: string): string {
  try {
    const last = fs.readFileSync(file, 'utf8').trimEnd().split('\n').at(-1) ?? '';
    return last.length > 300 ? `${last.slice(0, 300)}…` : last || '(its log is empty)';
  } catch {
    return '(no log)';
  }
}

/** A port that was free a moment ago on 127.0.0.1 (for the UI's internal port). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Starts `temporal server start-dev` and resolves once it answers. */
export async function startDevServer(o: DevServerOptions): Promise<DevServer> {
  const bin = temporalBinary();
  fs.mkdirSync(path.dirname(o.dbFile), { recursive: true });
  const out = o.logFile ? fs.openSync(o.logFile, 'a') : 'ignore';
  // Its own process group: a Ctrl-C in the terminal reaches us, and we stop Temporal last.
  const child = spawn(bin, devServerArgs(o), { stdio: ['ignore', out, out], detached: true });
  if (typeof out === 'number') fs.closeSync(out);
  const address = `${o.ip ?? '127.0.0.1'}:${o.port}`;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await Promise.race([
      waitForTemporal(address),
      exited.then(() => {
        throw new Error(`temporal server start-dev exited early${o.logFile ? `: ${logTail(o.logFile)} (see ${o.logFile})` : ''}`);
      }),
    ]);
  } catch (err) {
    // It runs in its own process group: never leave it behind.
    child.kill('SIGKILL');
    throw err;
  }
  return {
    address,
    uiUrl: o.uiPort === null ? null : `http://${o.uiIp ?? o.ip ?? '127.0.0.1'}:${o.uiPort}`,
    child,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}
