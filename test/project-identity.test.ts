/**
 * One identity per project (domain/job-identity.ts, db/queries/project-identity.ts,
 * api/routes/project-users.ts): the control plane gives each project a uid of its pool once, an
 * admin maps a project to an existing user, and a node places an identity by its own --job-users.
 * Real PostgreSQL (the test app's database), the real gpuctl; the e2e of jobs on nodes is
 * test/isolated-identity.e2e.test.ts.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityFor } from '../db/queries/project-identity.ts';
import { ensureProject } from '../db/queries/projects.ts';
import { parseJobUsers, placeIdentity, type JobIdentity, type JobUser } from '../domain/job-identity.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const admin = newToken();
let t: TestApp;

const gpuctl = (token: string, ...args: string[]) => promisify(execFile)(process.execPath, ['cli/gpuctl.mjs', '--api', t.url, ...args], { env: { ...process.env, GPUPLANE_TOKEN: token } });
const refused = async (token: string, ...args: string[]) => (await gpuctl(token, ...args).then(() => ({ code: 0, stderr: '' }), (e: { code: number; stderr: string }) => e)) as { code: number; stderr: string };

async function call<T = Record<string, unknown>>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object, token = admin): Promise<{ status: number; body: T }> {
  const r = await t.app.inject({ method, url, ...(payload ? { payload } : {}), headers: { authorization: `Bearer ${token}` } });
  return { status: r.statusCode, body: r.json() as T };
}

const POOL: JobUser[] = (parseJobUsers('3900000-3900003', () => null) as { users: JobUser[] }).users;

beforeAll(async () => {
  t = await startTestApp('identity', { auth: { adminTokens: [admin] }, temporal: false, listen: true });
});
afterAll(async () => {
  await t?.close();
});

describe('a node places a project identity by its own --job-users (placeIdentity)', () => {
  const pool = (id: Partial<JobIdentity>): JobIdentity => ({ uid: 3900001, gid: 3900001, name: 'gpuplane-3900001', source: 'pool', slot: 1, ...id });
  it("the plane's uid where the node's pool holds it; else the same place in the node's pool, said to differ; an admin's mapping only where allowed", () => {
    expect(placeIdentity(pool({}), POOL, 0, 'p')).toEqual({ ok: true, user: { uid: 3900001, gid: 3900001, name: 'gpuplane-3900001' }, differs: false });
    const other = (parseJobUsers('5000-5009', () => null) as { users: JobUser[] }).users;
    expect(placeIdentity(pool({}), other, 0, 'p')).toEqual({ ok: true, user: { uid: 5001, gid: 5001, name: 'gpuplane-5001' }, differs: true });
    expect(placeIdentity(pool({ slot: 10 }), other, 0, 'p')).toMatchObject({ ok: false });
    const alice: JobIdentity = { uid: 1001, gid: 2000, name: 'alice', source: 'admin', slot: null };
    const refusal = placeIdentity(alice, POOL, 0, 'vision');
    expect(refusal).toEqual({
      ok: false,
      why: "project vision runs as alice (uid 1001, gid 2000; set by an admin), which this node may not use: its gpuctl agent --job-users (GPUPLANE_JOB_USERS) is uids 3900000-3900003; add alice or uid 1001 to it, or map the project to a user it allows (gpuctl project set-user)",
    });
    expect(placeIdentity(alice, [...POOL, { uid: 1001, gid: 1001, name: 'alice' }], 0, 'vision')).toEqual({ ok: true, user: { uid: 1001, gid: 2000, name: 'alice' }, differs: false });
    // A node that runs jobs as the agent's own user: a pool identity runs as it; an admin's mapping only if it is that user.
    expect(placeIdentity(pool({}), null, 1234, 'p')).toEqual({ ok: true, user: null, differs: false });
    expect(placeIdentity(alice, null, 1234, 'vision')).toMatchObject({ ok: false, why: expect.stringContaining("this node runs every job as the agent's own user (uid 1234)") });
    expect(placeIdentity(alice, null, 1001, 'vision')).toMatchObject({ ok: true, user: null });
  });

  it('--job-users takes ranges and names together', () => {
    const lookup = (n: string) => (n === 'alice' ? { uid: 1001, gid: 1001, name: 'alice' } : null);
    const spec = parseJobUsers('5000-5001,alice', lookup);
    expect(spec).toEqual({ kind: 'pool', users: [{ uid: 5000, gid: 5000, name: 'gpuplane-5000' }, { uid: 5001, gid: 5001, name: 'gpuplane-5001' }, { uid: 1001, gid: 1001, name: 'alice' }] });
  });
});

describe("the control plane gives each project one uid of its pool, once", () => {
  it('a project keeps its uid; two projects get two; an exhausted pool gives none; an admin-mapped uid is never given', async () => {
    const db = t.database.db;
    const [a, b, c, d] = await Promise.all(['id-a', 'id-b', 'id-c', 'id-d'].map((n) => ensureProject(db, n)));
    const first = await db.transaction((tx) => identityFor(tx, a, POOL));
    expect(first).toEqual({ uid: 3900000, gid: 3900000, name: 'gpuplane-3900000', source: 'pool', slot: 0, project: 'id-a' });
    // Asked again (another attempt, another node): the same, whatever the pool says now.
    expect(await db.transaction((tx) => identityFor(tx, a, POOL.slice(1)))).toEqual(first);
    // An admin maps a project to the pool's next free uid: the pool skips it.
    expect((await call('PUT', '/api/v1/projects/id-x/job-user', { uid: 3900001 })).status).toBe(200);
    // Two projects at once: two uids (the assignment is serialised).
    const [ib, ic] = await Promise.all([b, c].map((p) => db.transaction((tx) => identityFor(tx, p, POOL))));
    expect(new Set([ib!.uid, ic!.uid, first!.uid]).size).toBe(3);
    expect([ib!.uid, ic!.uid]).not.toContain(3900001);
    expect(await db.transaction((tx) => identityFor(tx, d, POOL))).toBeNull();
    expect(await db.transaction((tx) => identityFor(tx, d, null))).toBeNull();
  });
});

describe('gpuctl project set-user and gpuctl projects', () => {
  it('maps a project to an existing user by name (its primary group) or by uid, shows it, and --clear goes back to the pool', async () => {
    const { stdout } = await gpuctl(admin, 'project', 'set-user', 'vision', '--user', 'nobody');
    expect(stdout.trim()).toBe('project vision runs its jobs as nobody (uid 65534, gid 65534) on every node, set by an admin');
    const byUid = JSON.parse((await gpuctl(admin, 'project', 'set-user', 'speech', '--uid', '4100000', '--group', 'nogroup', '--json')).stdout);
    expect(byUid).toEqual({ project: 'speech', identity: { uid: 4100000, gid: 65534, user: 'gpuplane-4100000', source: 'admin' } });
    const listed = JSON.parse((await gpuctl(admin, 'projects', '--json')).stdout) as { projects: { project: string; identity: unknown }[] };
    expect(listed.projects.find((p) => p.project === 'vision')?.identity).toEqual({ uid: 65534, gid: 65534, user: 'nobody', source: 'admin' });
    expect(listed.projects.find((p) => p.project === 'id-a')?.identity).toEqual({ uid: 3900000, gid: 3900000, user: 'gpuplane-3900000', source: 'pool' });
    const table = (await gpuctl(admin, 'projects')).stdout;
    expect(table).toMatch(/^PROJECT\s+JOB USER\s+UID\s+GID\s+FROM/);
    expect(table).toMatch(/vision\s+nobody\s+65534\s+65534\s+set-user/);
    expect((await gpuctl(admin, 'project', 'set-user', 'speech', '--clear')).stdout.trim()).toBe("project speech has no job user yet: its first attempt gets a uid of the control plane's pool");
  });

  it('bad input: an unknown user, uid 0, both --user and --uid, a uid another project has from the pool → 400/409 and one line; nothing changed', async () => {
    const before = (await call('GET', '/api/v1/projects')).body;
    const api: [object, number, RegExp][] = [
      [{ user: 'no-such-user-here' }, 400, /no user named "no-such-user-here"/],
      [{ user: 'root' }, 400, /root; jobs must run unprivileged/],
      [{ uid: 0 }, 400, /uid/],
      [{ user: 'nobody', uid: 5000 }, 400, /give exactly one of user .* and uid/],
      [{}, 400, /give exactly one of user .* and uid/],
      [{ uid: 5000, group: 'nogroup', gid: 5 }, 400, /give group \(a name\) or gid, not both/],
      [{ uid: 5000, group: 'no-such-group-here' }, 400, /no group named "no-such-group-here"/],
      [{ uid: 3900000 }, 409, /uid 3900000 is project id-a's \(given from the pool\)/],
    ];
    for (const [body, status, message] of api) {
      const r = await call<{ message: string }>('PUT', '/api/v1/projects/vision/job-user', body);
      expect([r.status, r.body.message], JSON.stringify(body)).toEqual([status, expect.stringMatching(message)]);
    }
    for (const args of [
      ['vision', '--user', 'no-such-user-here'],
      ['vision', '--uid', '0'],
      ['vision', '--user', 'nobody', '--uid', '5000'],
      ['vision'],
      ['vision', '--clear', '--uid', '5000'],
    ]) {
      const e = await refused(admin, 'project', 'set-user', ...args);
      expect(e.code, args.join(' ')).not.toBe(0);
      expect(e.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
    // A member (even of the project) may not map it; it sees only its own projects.
    const member = (await call<{ token: string }>('POST', '/api/v1/tokens', { name: 'id-member', role: 'member', projects: ['vision'] })).body.token;
    expect((await call('PUT', '/api/v1/projects/vision/job-user', { uid: 5000 }, member)).status).toBe(403);
    expect((await call<{ projects: { project: string }[] }>('GET', '/api/v1/projects', undefined, member)).body.projects.map((p) => p.project)).toEqual(['vision']);
    expect((await call('GET', '/api/v1/projects')).body).toEqual(before);
  });
});
