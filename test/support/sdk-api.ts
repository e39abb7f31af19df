import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { openDatabase, type DatabaseHandle } from '../../db/client.ts';
import { connectClient, ensureNamespace } from '../../temporal/setup.ts';

export interface SdkApi {
  app: FastifyInstance;
  port: number;
  url: string;
  /** GET /api/v1<path> through app.inject, parsed. */
  get<T = Record<string, unknown>>(p: string): Promise<T>;
  close(): Promise<void>;
}

/** The real API in-process on PGlite with a real Temporal client, listening on a free port, for the SDK tests. */
export async function startSdkApi(temporalAddress: string, name: string): Promise<SdkApi> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `gpuplane-${name}-`));
  const database: DatabaseHandle = await openDatabase({ dataDir });
  const ns = `${name}-${Math.random().toString(36).slice(2, 8)}`;
  await ensureNamespace(temporalAddress, ns);
  const t = await connectClient(temporalAddress, ns);
  const app = await buildApp({ db: database.db, client: t.client, timeouts: { heartbeatTimeoutMs: 5000, lostAfterMs: 30_000 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    app,
    port,
    url: `http://127.0.0.1:${port}`,
    async get<T>(p: string): Promise<T> {
      const res = await app.inject({ method: 'GET', url: `/api/v1${p}` });
      if (res.statusCode !== 200) throw new Error(`GET ${p}: ${res.statusCode} ${res.body}`);
      return res.json() as T;
    },
    async close() {
      await app.close();
      await t.close();
      await database.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface RunJson {
  id: string;
  project: string;
  experiment: string;
  name: string | null;
  source: string;
  status: string;
  params: Record<string, unknown>;
  system_tags: Record<string, string>;
  metrics: Record<string, { count: number; nan_count: number; first_step: number; last_step: number; last: unknown }>;
}

export interface SeriesJson {
  series: { key: string; width: number; points?: { step: number; value: number | string }[] }[];
}

export interface EventsJson {
  events: { kind: string; level: string; message: string; data: Record<string, unknown> | null }[];
}
