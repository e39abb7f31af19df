/**
 * What the MLflow tests (test/mlflow*.test.ts) share: an app with auth, listening (the real MLflow
 * client calls it over HTTP), with its own artifact folder, and Python run with the client pointed
 * at it. The fixtures folder (test/fixtures/mlflow) is on the script's PYTHONPATH, so an inline
 * script imports client_errors.py as the fixtures do.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { examplesPython } from './examples.ts';
import { startTestApp, type TestApp } from './test-app.ts';
import { newToken } from '../../runtime/tokens.ts';

export const mlflowFixtures = path.resolve(import.meta.dirname, '..', 'fixtures', 'mlflow');

export interface PythonResult {
  status: number;
  stdout: string;
  stderr: string;
}

export interface MlflowClientOptions {
  /** The Python to run (read when a script runs); the examples' venv by default. */
  python?: () => string;
  /** The scripts' working directory. */
  cwd?: string;
  /** How long a script may run before it is killed. */
  timeoutMs?: number;
  maxBuffer?: number;
}

export interface MlflowTestApp {
  /** An admin's token. */
  admin: string;
  /** The app's artifact folder (removed after the file's tests). */
  artifactsDir: string;
  /** The app, once the file's beforeAll has run. */
  readonly t: TestApp;
  /** Runs Python (code with -c, or a fixture) with the MLflow client pointed at the app, as `token` (null: none); asynchronously, as the API answers from this process. */
  python(args: string[], token: string | null, env?: Record<string, string>): Promise<PythonResult>;
  /** A request to the app (inject) as `token`, the admin by default. */
  api<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, token?: string): Promise<{ status: number; body: T }>;
}

/** Starts the app `name` before the file's tests and closes it after them. */
export function useMlflowApp(name: string, opts: MlflowClientOptions = {}): MlflowTestApp {
  const admin = newToken();
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), `gpuplane-${name.replace(/_/g, '-')}-`));
  let app: TestApp | undefined;
  const current = () => {
    if (!app) throw new Error(`${name}: the app starts in beforeAll`);
    return app;
  };
  beforeAll(async () => {
    app = await startTestApp(name, { auth: { adminTokens: [admin] }, listen: true, temporal: false, artifactsDir });
  });
  afterAll(async () => {
    await app?.close();
    fs.rmSync(artifactsDir, { recursive: true, force: true });
  });
  return {
    admin,
    artifactsDir,
    get t() {
      return current();
    },
    python: (args, token, env = {}) =>
      new Promise((resolve) => {
        execFile(
          (opts.python ?? examplesPython)(),
          args,
          {
            encoding: 'utf8',
            ...(opts.cwd ? { cwd: opts.cwd } : {}),
            ...(opts.maxBuffer ? { maxBuffer: opts.maxBuffer } : {}),
            env: {
              PATH: process.env.PATH ?? '',
              HOME: process.env.HOME ?? '/tmp',
              PYTHONPATH: mlflowFixtures,
              MLFLOW_TRACKING_URI: `${current().url}/mlflow`,
              ...(token ? { MLFLOW_TRACKING_TOKEN: token } : {}),
              // Fail fast: the client's retries of a refused request would take minutes.
              MLFLOW_HTTP_REQUEST_MAX_RETRIES: '0',
              PYTHONDONTWRITEBYTECODE: '1',
              ...env,
            },
            timeout: opts.timeoutMs ?? 150_000,
          },
          (err, stdout, stderr) => resolve({ status: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
        );
      }),
    api: async <T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, token = admin) => {
      const res = await current().app.inject({ method, url, payload: payload as Record<string, unknown>, headers: { authorization: `Bearer ${token}` } });
      return { status: res.statusCode, body: res.json() as T };
    },
  };
}

/** The JSON object a script printed last (the client prints "View run at" lines of its own). */
export const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
