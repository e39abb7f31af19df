import type { FastifyInstance } from 'fastify';
import { newToken } from '../../runtime/tokens.ts';
import { startTestApp } from './test-app.ts';

export interface SdkApi {
  app: FastifyInstance;
  port: number;
  url: string;
  /** An admin token (GPUPLANE_ADMIN_TOKEN of this API): SDK processes get it as GPUPLANE_TOKEN. */
  token: string;
  /** GET /api/v1<path> through app.inject with the admin token, parsed. */
  get<T = Record<string, unknown>>(p: string): Promise<T>;
  /** POST /api/v1<path> through app.inject with the admin token; expects 2xx, parsed. */
  post<T = Record<string, unknown>>(p: string, body: Record<string, unknown>): Promise<T>;
  /** A new member token of `projects` (what a user's script outside a job gets). */
  memberToken(projects: string[]): Promise<{ id: string; token: string }>;
  /** Revokes a token; this API stops taking it at once. */
  revokeToken(id: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The real API in-process (startTestApp: PostgreSQL, a real Temporal client on a namespace of its
 * own of the suite's dev server, which is `_temporalAddress`), listening on a free port, for the SDK tests.
 */
export async function startSdkApi(_temporalAddress: string, name: string): Promise<SdkApi> {
  const token = newToken();
  const testApp = await startTestApp(name, { auth: { adminTokens: [token] }, listen: true });
  const { app } = testApp;
  const port = Number(new URL(testApp.url).port);
  async function call<T>(method: 'GET' | 'POST' | 'DELETE', p: string, payload?: Record<string, unknown>): Promise<T> {
    const res = await app.inject({ method, url: `/api/v1${p}`, payload, headers: { authorization: `Bearer ${token}` } });
    if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`${method} ${p}: ${res.statusCode} ${res.body}`);
    return res.json() as T;
  }
  return {
    app,
    port,
    url: `http://127.0.0.1:${port}`,
    token,
    get: <T>(p: string) => call<T>('GET', p),
    post: <T>(p: string, body: Record<string, unknown>) => call<T>('POST', p, body),
    async memberToken(projects: string[]) {
      const name = `sdk-member-${Math.random().toString(36).slice(2, 8)}`;
      return call<{ id: string; token: string }>('POST', '/tokens', { name, role: 'member', projects });
    },
    async revokeToken(id: string) {
      await call('DELETE', `/tokens/${id}`);
    },
    close: () => testApp.close(),
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
