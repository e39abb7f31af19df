import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { inject } from 'vitest';
import { buildApp } from '../../api/app.ts';
import type { ApiDeps } from '../../api/deps.ts';
import { openDatabase, type DatabaseHandle } from '../../db/client.ts';
import { connectClient, ensureNamespace } from '../../temporal/setup.ts';

export interface TestApp {
  app: FastifyInstance;
  database: DatabaseHandle;
  /** The Temporal client (a namespace of its own), or a stand-in when `temporal: false`. */
  client: Client;
  close(): Promise<void>;
}

/**
 * The real app through app.inject, on PGlite in a folder of its own, with a real Temporal client
 * on a fresh namespace of the shared dev server (or none with `temporal: false`). `deps`
 * overrides the defaults (auth off, short timeouts).
 */
export async function startTestApp(name: string, deps: Partial<ApiDeps> & { temporal?: false } = {}, opts: FastifyServerOptions = {}): Promise<TestApp> {
  const database = await openDatabase({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), `gpuplane-${name}-`)) });
  let temporal: { client: Client; close(): Promise<void> } = { client: {} as Client, close: async () => undefined };
  if (deps.temporal !== false) {
    const ns = `${name}-${Math.random().toString(36).slice(2, 8)}`;
    await ensureNamespace(inject('temporalAddress'), ns);
    temporal = await connectClient(inject('temporalAddress'), ns);
  }
  const { temporal: _omit, ...rest } = deps;
  const app = await buildApp({ db: database.db, client: temporal.client, timeouts: { heartbeatTimeoutMs: 5000, lostAfterMs: 30_000 }, auth: null, ...rest }, opts);
  return {
    app,
    database,
    client: temporal.client,
    async close() {
      await app.close();
      await temporal.close();
      await database.close();
    },
  };
}
