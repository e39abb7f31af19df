import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/test-app.ts';

const run = promisify(execFile);
const gpuctl = path.resolve('cli/gpuctl.mjs');

/** What gpuctl and the console say to someone with no token. */
describe('the advice of a 401', () => {
  let t: TestApp;
  let home: string;
  const cli = async (env: Record<string, string>, ...args: string[]) => {
    const { GPUPLANE_TOKEN: _, ...rest } = process.env;
    try {
      const r = await run(process.execPath, [gpuctl, '--api', t.url, ...args], { env: { ...rest, GPUPLANE_LOG_LEVEL: 'warn', ...env } });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  beforeAll(async () => {
    t = await startTestApp('cli-auth-hint', { temporal: false, listen: true, auth: { adminTokens: [`gpt_${'a'.repeat(43)}`] } });
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-home-'));
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('says once how to get a token, and names the GPUPLANE_HOME gpuctl looked in', async () => {
    const r = await cli({ GPUPLANE_HOME: home }, 'jobs');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `gpuctl: this needs a token, and gpuctl found none (no --api-token, GPUPLANE_TOKEN, token or admin-token in GPUPLANE_HOME=${home}): gpuctl login --token <token>, or set GPUPLANE_TOKEN (HTTP 401)\n`,
    );
    expect(r.stderr.split('GPUPLANE_TOKEN').length - 1).toBe(2);
    const refused = await cli({ GPUPLANE_HOME: home, GPUPLANE_TOKEN: `gpt_${'b'.repeat(43)}` }, 'jobs');
    expect(refused.stderr).toBe('gpuctl: unknown or revoked token (gpuctl login --token <token>, or set GPUPLANE_TOKEN) (HTTP 401)\n');
  });

  it("has the console's sign-in page name the home's admin-token, not one fixed path", () => {
    const page = fs.readFileSync(path.resolve('web/src/sign-in.tsx'), 'utf8');
    expect(page).not.toContain('~/.gpuplane/admin-token');
    expect(page).toContain('<code>$GPUPLANE_HOME</code>');
  });
});
