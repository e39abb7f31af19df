/**
 * A real Temporal cluster (not the dev server): `temporal-server` v1.27.2 with its persistence
 * and its visibility on PostgreSQL, a configurable number of history shards, all four services
 * (frontend, history, matching, worker) in one process. The binaries and the schemas come from
 * ./ensure-temporal-server.sh (built once with `go install`, cached outside the checkout).
 *
 * It is what users run once they outgrow one machine; GPUPlane runs on it unchanged, and the
 * tests and bench/dispatch prove that here.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { stringify } from 'yaml';
import { waitForTemporal } from './dev-server.ts';
import { ensureNamespace } from './setup.ts';
import type { TemporalSecurity } from './security.ts';

const run = promisify(execFile);
const ensureScript = fileURLToPath(new URL('./ensure-temporal-server.sh', import.meta.url));

/** The folder with `temporal-server`, `temporal-sql-tool` and `schema/` (built on first use). */
export function temporalServerHome(): string {
  return execFileSync('bash', [ensureScript], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface ClusterOptions {
  /** PostgreSQL to keep Temporal's two databases in. */
  pg: { host: string; port: number; user: string; password?: string };
  /** Prefix of the two databases: `<db>` (persistence) and `<db>_visibility`. */
  db: string;
  /** Frontend gRPC port; the other services take free ports. */
  port: number;
  /** History shards: fixed for the life of the databases (4 by default, as Temporal's development config). */
  numHistoryShards?: number;
  /** Folder for the config, dynamic config and log. */
  dir: string;
  /** Namespaces to register, with GPUPlane's search attributes. */
  namespaces?: string[];
  /**
   * mTLS on the frontend: its certificate and key (which must also be good for client auth:
   * the server's own workers present it to the frontend), and the CA that signs clients'.
   */
  tls?: { certFile: string; keyFile: string; caFile: string; serverName: string };
}

export interface TemporalCluster {
  address: string;
  child: ChildProcess;
  logFile: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

function listenOn(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(null));
    s.listen(port, '127.0.0.1', () => {
      const { port: got } = s.address() as net.AddressInfo;
      s.close(() => resolve(got));
    });
  });
}

/**
 * A free port. Membership ports are stored in a smallint column (cluster_membership), so they
 * must be below 32768, under the ephemeral range the kernel hands out for port 0.
 */
async function freePort(below?: number): Promise<number> {
  if (below === undefined) return (await listenOn(0))!;
  for (let tries = 0; tries < 200; tries++) {
    const got = await listenOn(20_000 + Math.floor(Math.random() * (below - 20_000)));
    if (got !== null) return got;
  }
  throw new Error(`no free port below ${below}`);
}

async function ensureDatabase(o: ClusterOptions['pg'], name: string): Promise<boolean> {
  const c = new pg.Client({ host: o.host, port: o.port, user: o.user, password: o.password, database: 'postgres' });
  await c.connect();
  try {
    const { rowCount } = await c.query('select 1 from pg_database where datname = $1', [name]);
    if (rowCount) return false;
    await c.query(`create database "${name.replace(/"/g, '""')}"`);
    return true;
  } finally {
    await c.end();
  }
}

/** Creates the schema of a new database, then brings it to the version's latest. */
async function setupSchema(home: string, o: ClusterOptions['pg'], db: string, kind: 'temporal' | 'visibility'): Promise<void> {
  const base = ['--plugin', 'postgres12', '--ep', o.host, '-p', String(o.port), '-u', o.user, ...(o.password ? ['--pw', o.password] : []), '--db', db];
  const tool = path.join(home, 'temporal-sql-tool');
  await run(tool, [...base, 'setup-schema', '-v', '0.0']);
  await run(tool, [...base, 'update-schema', '-d', path.join(home, 'schema', 'postgresql', 'v12', kind, 'versioned')]);
}

/** The server's static config: PostgreSQL for persistence and visibility, ports, no metrics or pprof listeners. */
function serverConfig(o: ClusterOptions, ports: Record<'frontend' | 'frontendHttp' | 'history' | 'matching' | 'worker' | 'mFrontend' | 'mHistory' | 'mMatching' | 'mWorker', number>, dynamicConfig: string) {
  const sql = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${o.pg.host}:${o.pg.port}`,
      connectProtocol: 'tcp',
      user: o.pg.user,
      password: o.pg.password ?? '',
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const svc = (grpcPort: number, membershipPort: number, extra: object = {}) => ({ rpc: { grpcPort, membershipPort, bindOnLocalHost: true, ...extra } });
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'default',
      visibilityStore: 'visibility',
      numHistoryShards: o.numHistoryShards ?? 4,
      datastores: { default: sql(o.db, 20), visibility: sql(`${o.db}_visibility`, 10) },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      ...(o.tls
        ? {
            tls: {
              frontend: {
                server: { certFile: o.tls.certFile, keyFile: o.tls.keyFile, requireClientAuth: true, clientCaFiles: [o.tls.caFile] },
                client: { serverName: o.tls.serverName, rootCaFiles: [o.tls.caFile] },
              },
              // The server's own system workers call the frontend as clients: with its certificate.
              systemWorker: { certFile: o.tls.certFile, keyFile: o.tls.keyFile, client: { serverName: o.tls.serverName, rootCaFiles: [o.tls.caFile] } },
            },
          }
        : {}),
    },
    services: {
      frontend: svc(ports.frontend, ports.mFrontend, { httpPort: ports.frontendHttp }),
      history: svc(ports.history, ports.mHistory),
      matching: svc(ports.matching, ports.mMatching),
      worker: svc(ports.worker, ports.mWorker),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: { active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `127.0.0.1:${ports.frontend}` } },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: dynamicConfig, pollInterval: '10s' },
  };
}

/** The cluster's dynamic config (no call home, search attributes visible at once, room for every node's poll), shared with temporal/docker-compose.yml. */
const DYNAMIC_CONFIG_FILE = fileURLToPath(new URL('./dynamicconfig/gpuplane.yaml', import.meta.url));

/**
 * Starts the cluster: creates and migrates its two databases where new, writes its config
 * under `dir`, starts `temporal-server`, waits for the frontend, and registers the namespaces
 * with GPUPlane's search attributes.
 */
export async function startTemporalCluster(o: ClusterOptions): Promise<TemporalCluster> {
  const home = temporalServerHome();
  for (const [db, kind] of [
    [o.db, 'temporal'],
    [`${o.db}_visibility`, 'visibility'],
  ] as const) {
    if (await ensureDatabase(o.pg, db)) await setupSchema(home, o.pg, db, kind);
  }
  const configDir = path.join(o.dir, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  const dynamicConfig = path.join(configDir, 'dynamic.yaml');
  fs.copyFileSync(DYNAMIC_CONFIG_FILE, dynamicConfig);
  const ports = {
    frontend: o.port,
    frontendHttp: await freePort(),
    history: await freePort(),
    matching: await freePort(),
    worker: await freePort(),
    mFrontend: await freePort(32_767),
    mHistory: await freePort(32_767),
    mMatching: await freePort(32_767),
    mWorker: await freePort(32_767),
  };
  fs.writeFileSync(path.join(configDir, 'development.yaml'), stringify(serverConfig(o, ports, dynamicConfig)));
  const logFile = path.join(o.dir, 'temporal-server.log');
  const out = fs.openSync(logFile, 'a');
  const child = spawn(path.join(home, 'temporal-server'), ['--root', o.dir, '--config', 'config', '--env', 'development', '--allow-no-auth', 'start'], {
    stdio: ['ignore', out, out],
    detached: true,
    env: { ...process.env, TEMPORAL_VERSION_CHECK_DISABLED: '1' },
  });
  fs.closeSync(out);
  const address = `127.0.0.1:${o.port}`;
  // With mTLS the cluster's own checks present its certificate as a client's.
  const security: TemporalSecurity = o.tls
    ? { tls: { clientCertPair: { crt: fs.readFileSync(o.tls.certFile), key: fs.readFileSync(o.tls.keyFile) }, serverRootCACertificate: fs.readFileSync(o.tls.caFile), serverNameOverride: o.tls.serverName } }
    : {};
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await Promise.race([
      waitForTemporal(address, 120_000, security),
      exited.then(() => {
        throw new Error(`temporal-server exited early; see ${logFile}`);
      }),
    ]);
    for (const ns of o.namespaces ?? []) await ensureNamespace(address, ns, security);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    address,
    child,
    logFile,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}
