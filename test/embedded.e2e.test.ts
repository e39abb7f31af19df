import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuctlPath } from './support/cluster.ts';
import { freePort } from './support/ports.ts';
import { startGpuctlUp, type GpuctlUp } from './support/gpuctl-up.ts';

const exec = promisify(execFile);

/**
 * The quick start as a user runs it: `gpuctl up` on its embedded defaults makes an admin token
 * on its first start, keeps it 0600 in its home, and `gpuctl` on the same machine uses it with
 * no set-up; other users log in with tokens an admin makes.
 */
describe('gpuctl up: tokens on the embedded defaults', () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-embedded-'));
  // First on gpuctl up's PATH: a `gpuctl` that is not this checkout's, until a test links it here as `npm link` does.
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bin-'));
  const lib = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-lib-'));
  fs.writeFileSync(path.join(bin, 'gpuctl'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
  const script = fs.realpathSync(gpuctlPath);
  let apiUrl = '';
  let up: GpuctlUp | null = null;
  let uiPort = 0;
  let temporalPort = 0;
  const baseEnv = (): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...process.env, GPUPLANE_HOME: home, GPUPLANE_API_URL: apiUrl, GPUPLANE_LOG_LEVEL: 'warn' };
    for (const k of ['TEMPORAL_ADDRESS', 'DATABASE_URL', 'GPUPLANE_TOKEN', 'GPUPLANE_ADMIN_TOKEN', 'GPUPLANE_NODE_TOKEN', 'GPUPLANE_WEBHOOK_ALLOW_PRIVATE']) delete env[k];
    return env;
  };
  const gpuctl = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
    try {
      const r = await exec(process.execPath, [gpuctlPath, ...args], { env, cwd: home });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const startUp = async () => {
    // Fresh ports on every start: a restart on the ports the first start let go would race any
    // other test of the suite handed one of them since (the full run found it: the restarted
    // Temporal dev server "exited early"). The home, and so the plane, stays the same.
    apiUrl = `http://127.0.0.1:${await freePort()}`;
    temporalPort = await freePort();
    uiPort = await freePort();
    // A port of its own: never whatever answers on 7233 on this machine (gpuctl up refuses a server it did not start).
    up = await startGpuctlUp(['--fake-gpus', '2', '--temporal-port', String(temporalPort), '--temporal-ui-port', String(uiPort)], {
      ...baseEnv(),
      GPUPLANE_API_PORT: new URL(apiUrl).port,
      PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}`,
    });
  };
  const stopUp = async () => up?.stop();
  /** What the running `gpuctl up` printed. */
  const printed = () => up?.output() ?? '';

  beforeAll(async () => {
    await startUp();
  }, 200_000);
  afterAll(async () => {
    await stopUp();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(bin, { recursive: true, force: true });
    fs.rmSync(lib, { recursive: true, force: true });
  });

  it('makes an admin token on the first start, 0600 in the home; with stdout piped it prints where it is kept, never the token', () => {
    const file = path.join(home, 'admin-token');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(home).mode & 0o777).toBe(0o700);
    const token = fs.readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^gpt_/);
    // Piped (as into a log file): the console link without the token, and the file that keeps it.
    expect(printed()).not.toContain(token);
    expect(printed()).not.toContain('?token=');
    expect(printed()).toMatch(new RegExp(`web console +${apiUrl}/ +\\(sign in with the admin token kept in ${file}; stdout is not a terminal`));
    expect(printed()).toContain('made on this first start');
    const nodeTokens = path.join(home, 'node-tokens');
    expect(fs.statSync(nodeTokens).mode & 0o777).toBe(0o700);
    for (const f of fs.readdirSync(nodeTokens)) expect(fs.statSync(path.join(nodeTokens, f)).mode & 0o777).toBe(0o600);
  });

  it("prints the command to try on a line of its own, as it runs from any folder: node and the checkout's gpuctl.mjs when the gpuctl on PATH is another", () => {
    expect(up!.stdout()).toContain(`\nTry:\n  node ${script} submit --gpus 1 -- sh -c 'echo my cards: $CUDA_VISIBLE_DEVICES'\nCtrl-C stops everything.\n`);
  });

  it("webhooks reach public addresses only, Temporal's beside it refused; the banner names the setting that allows loopback (issue 39)", async () => {
    expect(up!.stdout()).toContain('\n  webhooks     to public addresses only; for a receiver on this machine start with GPUPLANE_WEBHOOK_ALLOW_PRIVATE=loopback\n');
    const refused = await gpuctl(baseEnv(), 'webhook', 'add', `http://127.0.0.1:${temporalPort}/api/v1/namespaces`, '--events', 'job.failed');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/127\.0\.0\.1 is a loopback address: .*GPUPLANE_WEBHOOK_ALLOW_PRIVATE/);
    expect((await gpuctl(baseEnv(), 'webhook', 'list', '--json')).stdout).not.toContain('127.0.0.1');
  });

  it('gpuctl on the same machine needs no set-up; from elsewhere it needs a token', async () => {
    const env = baseEnv();
    const submitted = await gpuctl(env, 'submit', '--type', 'CUSTOM', '--gpus', '1', '--', 'true');
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout.trim().split('\n').at(-1)!;
    expect((await gpuctl(env, 'wait', id)).code).toBe(0);
    expect((await gpuctl(env, 'whoami')).stdout).toMatch(/^admin/);

    const elsewhere = { ...env, GPUPLANE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-other-')) };
    const refused = await gpuctl(elsewhere, 'jobs');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/needs a token.*gpuctl login/);
  });

  it('an admin makes a viewer token; its user logs in, reads, and cannot submit', async () => {
    const env = baseEnv();
    const made = await gpuctl(env, 'token', 'create', '--name', 'vera', '--role', 'viewer', '--project', 'demo', '--json');
    expect(made.code, made.stderr).toBe(0);
    const { token, id } = JSON.parse(made.stdout) as { token: string; id: string };
    const vera = { ...env, GPUPLANE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-vera-')) };
    const login = await gpuctl(vera, 'login', '--token', token);
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toContain('viewer "vera" of demo');
    expect(fs.statSync(path.join(vera.GPUPLANE_HOME!, 'token')).mode & 0o777).toBe(0o600);
    expect((await gpuctl(vera, 'jobs', '--project', 'demo')).code).toBe(0);
    const submit = await gpuctl(vera, 'submit', '--project', 'demo', '--', 'true');
    expect(submit.code).toBe(1);
    expect(submit.stderr.trim().split('\n')).toEqual([expect.stringMatching(/viewer token "vera".*may only read/)]);
    const listed = await gpuctl(env, 'token', 'list', '--json');
    expect(listed.stdout).not.toContain(token);
    expect((await gpuctl(env, 'token', 'revoke', id)).code).toBe(0);
    const after = await gpuctl(vera, 'jobs', '--project', 'demo');
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/unknown or revoked token/);
    const badLogin = await gpuctl({ ...vera, GPUPLANE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bad-')) }, 'login', '--token', 'gpt_nope');
    expect(badLogin.code).toBe(1);
    expect(badLogin.stderr).not.toContain('gpt_nope');
  });

  it('refuses a request that names a foreign Host (DNS rebinding)', async () => {
    const token = fs.readFileSync(path.join(home, 'admin-token'), 'utf8').trim();
    const http = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${apiUrl}/api/v1/jobs`, { headers: { host: 'rebind.evil.example', authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(403);
  });

  /** A GET to the Temporal UI's advertised port with these headers: its status and body. */
  const ui = async (urlPath: string, headers: Record<string, string>) => {
    const http = await import('node:http');
    return new Promise<{ status: number; body: string; type: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: uiPort, path: urlPath, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, body, type: String(res.headers['content-type']) }));
      });
      req.on('error', reject);
      req.end();
    });
  };

  it('the Temporal UI answers only IP literals and loopback names, from its own origin (DNS rebinding)', async () => {
    expect(printed()).toContain(`Temporal UI  http://127.0.0.1:${uiPort}`);
    const self = `127.0.0.1:${uiPort}`;
    const page = await ui('/', { host: self });
    expect(page.status).toBe(200);
    expect(page.type).toMatch(/text\/html/);
    const namespaces = await ui('/api/v1/namespaces', { host: self });
    expect(namespaces.status, namespaces.body).toBe(200);
    expect(namespaces.body).toContain('default');
    expect((await ui('/api/v1/namespaces', { host: `localhost:${uiPort}`, origin: `http://localhost:${uiPort}` })).status).toBe(200);

    const rebound = await ui('/api/v1/namespaces', { host: 'evil.example' });
    expect(rebound.status).toBe(403);
    expect(rebound.body).toBe('Host "evil.example" is not one the Temporal UI answers to; add it to GPUPLANE_ALLOWED_HOSTS\n');
    expect((await ui('/', { host: `evil.example:${uiPort}` })).status).toBe(403);
    const crossSite = await ui('/api/v1/namespaces', { host: self, origin: 'http://evil.example' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.body).toMatch(/^Origin "http:\/\/evil.example" is not the Temporal UI's own/);
  });

  it('a second plane never shares the first one\'s Temporal by accident: it refuses in one line naming the flags', async () => {
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-second-'));
    const r = await gpuctl({ ...baseEnv(), GPUPLANE_HOME: other }, 'up', '--fake-gpus', '1', '--port', '0', '--temporal-port', String(temporalPort), '--temporal-ui-port', String(await freePort()));
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`something already answers at 127\\.0\\.0\\.1:${temporalPort}.*--temporal-port P.*--temporal-address 127\\.0\\.0\\.1:${temporalPort}`))]);
    fs.rmSync(other, { recursive: true, force: true });
  });

  it('Ctrl-C says it stops and when it is done, and exits 0; a restart keeps the same admin token, and makes its file 0600 and the home 0700 again', async () => {
    const before = fs.readFileSync(path.join(home, 'admin-token'), 'utf8');
    const first = up!;
    expect(await stopUp()).toEqual({ code: 0, signal: null });
    expect(first.stdout()).toMatch(/\nCtrl-C stops everything\.\n(.*\n)*stopping GPUPlane\.\.\.\n(.*\n)*GPUPlane stopped\.\n$/);
    // Linked as `npm link` links it (bin/gpuctl -> lib/node_modules/gpuplane/cli/gpuctl.mjs, that folder -> the checkout): the try-line says gpuctl.
    fs.symlinkSync(path.dirname(path.dirname(script)), path.join(lib, 'gpuplane'));
    fs.rmSync(path.join(bin, 'gpuctl'));
    fs.symlinkSync(path.join(lib, 'gpuplane', 'cli', 'gpuctl.mjs'), path.join(bin, 'gpuctl'));
    fs.chmodSync(path.join(home, 'admin-token'), 0o644);
    fs.chmodSync(home, 0o755);
    await startUp();
    expect(fs.readFileSync(path.join(home, 'admin-token'), 'utf8')).toBe(before);
    expect(printed()).toContain('admin token: in');
    expect(up!.stdout()).toContain(`\nTry:\n  gpuctl submit --gpus 1 -- sh -c 'echo my cards: $CUDA_VISIBLE_DEVICES'\nCtrl-C stops everything.\n`);
    expect(fs.statSync(path.join(home, 'admin-token')).mode & 0o777).toBe(0o600);
    expect(fs.statSync(home).mode & 0o777).toBe(0o700);
    expect(printed()).not.toContain(before.trim());
    expect((await gpuctl(baseEnv(), 'nodes')).code).toBe(0);
  }, 200_000);
});
