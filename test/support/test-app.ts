import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { inject } from 'vitest';
import { buildApp } from '../../api/app.ts';
import type { ApiDeps } from '../../api/deps.ts';
import type { DatabaseHandle } from '../../db/client.ts';
import { connectClient, ensureNamespace } from '../../temporal/setup.ts';
import { openTestDatabase, type TestBackend } from './test-database.ts';

export interface TestApp {
  app: FastifyInstance;
  database: DatabaseHandle;
  /** The Temporal client (a namespace of its own), or a stand-in when `temporal: false`. */
  client: Client;
  /** http://127.0.0.1:PORT with `listen: true`; '' otherwise. */
  url: string;
  close(): Promise<void>;
}

/** What a test asks of its app besides the API's deps. */
export interface TestAppOptions {
  /** false: a stand-in client, for routes that never reach Temporal; a Client: that one, which its owner closes. */
  temporal?: false | Client;
  /** The backend of a fresh database (the suite's PostgreSQL by default; test-database.ts), or a handle to share, which its owner closes. */
  database?: TestBackend | DatabaseHandle;
  /** Also listen on a free port of 127.0.0.1, for clients that speak HTTP (gpuctl, the SDKs, the shipper). */
  listen?: boolean;
}

/** The API's deps to override, and what else the test asks of its app. */
export type TestAppDeps = Partial<ApiDeps> & TestAppOptions;

/**
 * The real app through app.inject, on a fresh database (of its own on the suite's PostgreSQL unless
 * `database` says otherwise), with a real Temporal client on a fresh namespace of the shared dev
 * server (unless `temporal` says otherwise). `deps` overrides the defaults (auth off, short
 * timeouts). Every API-level test builds its app here.
 */
export async function startTestApp(name: string, deps: TestAppDeps = {}, opts: FastifyServerOptions = {}): Promise<TestApp> {
  const { temporal: want, database: db, listen, ...rest } = deps;
  const owned = typeof db === 'object' ? null : await openTestDatabase(name, db);
  const database = owned?.database ?? (db as DatabaseHandle);
  let temporal: { client: Client; close(): Promise<void> } = { client: {} as Client, close: async () => undefined };
  if (typeof want === 'object') temporal = { client: want, close: async () => undefined };
  else if (want !== false) {
    const ns = `${name}-${Math.random().toString(36).slice(2, 8)}`;
    await ensureNamespace(inject('temporalAddress'), ns);
    temporal = await connectClient(inject('temporalAddress'), ns);
  }
  const app = await buildApp({ db: database.db, client: temporal.client, timeouts: { heartbeatTimeoutMs: 5000, lostAfterMs: 30_000 }, auth: null, ...rest }, opts);
  const url = listen ? await app.listen({ port: 0, host: '127.0.0.1' }) : '';
  return {
    app,
    database,
    client: temporal.client,
    url,
    async close() {
      await app.close();
      await temporal.close();
      await owned?.close();
    },
  };
}
