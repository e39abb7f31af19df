import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** Finds Debian's PostgreSQL server binaries (the test script installs the package where missing). */
export function pgBinDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = fs.existsSync(base) ? fs.readdirSync(base).filter((v) => fs.existsSync(path.join(base, v, 'bin', 'initdb'))) : [];
  if (versions.length === 0) throw new Error('PostgreSQL server not found under /usr/lib/postgresql; run scripts/test.sh, which installs it');
  versions.sort((a, b) => Number(b) - Number(a));
  return path.join(base, versions[0], 'bin');
}

export interface PgCluster {
  port: number;
  dir: string;
  url(db: string): string;
  stop(mode?: 'fast' | 'immediate'): void;
  start(): Promise<void>;
  /** SIGSTOP (or SIGCONT) the postmaster and every backend: a server that hangs, connections open. */
  signalAll(sig: 'SIGSTOP' | 'SIGCONT'): void;
  remove(): void;
}

const asPostgres = (cmd: string, args: string[]): [string, string[]] =>
  process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];

/** A throwaway cluster: initdb into a temp folder, a free port, trust auth on loopback only. */
export async function startThrowawayCluster(port: number): Promise<PgCluster> {
  const bin = pgBinDir();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-pg-'));
  fs.chmodSync(dir, 0o777);
  const data = path.join(dir, 'data');
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres', dir]);
  const run = (cmd: string, args: string[]) => {
    const [c, a] = asPostgres(path.join(bin, cmd), args);
    execFileSync(c, a, { stdio: 'pipe' });
  };
  run('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  // fsync off: a throwaway cluster need not survive a power cut. synchronous_commit stays on, so
  // a commit's WAL is written (to the page cache) before COMMIT returns: the tests kill and
  // restart PostgreSQL (stop 'immediate', SIGKILL), and a committed job must still be there.
  fs.appendFileSync(
    path.join(data, 'postgresql.conf'),
    `\nlisten_addresses = '127.0.0.1'\nport = ${port}\nunix_socket_directories = '${dir}'\nfsync = off\nsynchronous_commit = on\nfull_page_writes = off\nmax_connections = 300\n`,
  );
  const cluster: PgCluster = {
    port,
    dir,
    url: (db) => `postgres://postgres@127.0.0.1:${port}/${db}`,
    stop(mode = 'fast') {
      try {
        run('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
      } catch {
        // Already stopped.
      }
    },
    async start() {
      const [c, a] = asPostgres(path.join(bin, 'pg_ctl'), ['-D', data, '-l', path.join(dir, 'log'), '-w', 'start']);
      await new Promise<void>((resolve, reject) => {
        const p = spawn(c, a, { stdio: 'ignore' });
        p.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_ctl start exited ${code}; see ${dir}/log`))));
      });
    },
    signalAll(sig) {
      const postmaster = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const children = fs
        .readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
            return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
          } catch {
            return false;
          }
        })
        .map(Number);
      for (const pid of [postmaster, ...children]) process.kill(pid, sig);
    },
    remove() {
      cluster.stop('immediate');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await cluster.start();
  return cluster;
}

/**
 * The database of the shared cluster (startSharedServices) that holds GPUPlane's schema, migrated
 * once: a test's database made from it is born migrated, so the API and workers that open it find
 * nothing to apply. A copy took 0.13-0.16 s against 0.33-0.38 s for an empty database migrated
 * (2026-12-08), for each of the suite's ~150 databases.
 */
export const MIGRATED_TEMPLATE = 'gpuplane_migrated';

/** Creates database `name`: a copy of `template` where given (nobody may be connected to it), else empty. */
export async function createDatabase(adminUrl: string, name: string, template?: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(`create database "${name}"${template ? ` template "${template}"` : ''}`);
  } finally {
    await c.end();
  }
}
