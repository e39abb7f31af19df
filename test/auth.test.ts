import http from 'node:http';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { nodeHasToken } from '../db/queries/tokens.ts';
import { checkpoints, evaluations, jobAttempts, jobs, nodes, runs } from '../db/schema.ts';
import { newToken, runToken } from '../runtime/tokens.ts';
import { dbFingerprinter } from './support/db-fingerprint.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';
import { untilJobWorkflow } from './support/poll.ts';

type Who = 'none' | 'bogus' | 'admin' | 'memberAlpha' | 'viewerAlpha' | 'memberBeta' | 'starViewer' | 'nodeA' | 'nodeB' | 'runJ';
/** What a request needs: open, any user token, admin, read/write of project alpha, or (besides) the node of job J, or run J's own token. */
type Need = { access: 'open' | 'any' | 'admin' | 'read' | 'write'; node?: boolean; run?: boolean; everyone?: boolean };

/**
 * Every route family under every kind of token, through the real app on PostgreSQL: allowed, or
 * 401/403 with a message and not one row changed anywhere in the database.
 */
describe('tokens and roles on every route', () => {
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let t: TestApp;
  let fingerprint: () => Promise<string>;
  const admin = newToken();
  const tokens = {} as Record<Who, string | undefined>;
  let jobJ: string;
  let runJ: string;
  let runA: string;
  let ckpt: string;
  let evalId: string;

  const call = (who: Who, method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    app.inject({
      method: method as 'GET',
      url: `/api/v1${url}`,
      headers: { ...(tokens[who] ? { authorization: `Bearer ${tokens[who]}` } : {}), ...headers },
      ...(payload === undefined ? {} : { payload: payload as string }),
    });

  beforeAll(async () => {
    t = await startTestApp('auth', { auth: { adminTokens: [admin] } });
    ({ app, database } = t);
    tokens.admin = admin;
    tokens.bogus = newToken();
    const make = async (body: object) => {
      const r = await call('admin', 'POST', '/tokens', body);
      expect(r.statusCode, r.body).toBe(201);
      return (r.json() as { token: string }).token;
    };
    tokens.memberAlpha = await make({ name: 'alice', role: 'member', projects: ['alpha'] });
    tokens.viewerAlpha = await make({ name: 'vera', role: 'viewer', projects: ['alpha'] });
    tokens.memberBeta = await make({ name: 'bob', role: 'member', projects: ['beta'] });
    tokens.starViewer = await make({ name: 'auditor', role: 'viewer', projects: ['*'] });
    tokens.nodeA = await make({ name: 'a', role: 'node', node_id: 'node-a' });
    tokens.nodeB = await make({ name: 'b', role: 'node', node_id: 'node-b' });

    // A job of project alpha (its attempt dispatched to node-a), its run, a checkpoint and an evaluation; and an SDK run.
    const job = await call('admin', 'POST', '/jobs', { command: ['true'], project: 'alpha', experiment: 'e1', type: 'TRAIN' });
    expect(job.statusCode, job.body).toBe(201);
    jobJ = (job.json() as { id: string }).id;
    await database.db.update(jobAttempts).set({ nodeId: 'node-a' }).where(eq(jobAttempts.jobId, jobJ));
    // Its workflow has started (no control worker runs here, so it waits): a cancel goes to it as
    // a signal and a retry is refused (409) while the job is CREATED; neither changes a row.
    await untilJobWorkflow(t.client, jobJ);
    const [jobRow] = await database.db.select({ projectId: jobs.projectId, experimentId: jobs.experimentId }).from(jobs).where(eq(jobs.id, jobJ));
    runJ = newId('run');
    await database.db.insert(runs).values({ id: runJ, projectId: jobRow.projectId, experimentId: jobRow.experimentId, jobId: jobJ, attempt: 1, source: 'job', status: 'running' });
    tokens.runJ = runToken(tokens.nodeA!, runJ, 1);
    const sdk = await call('admin', 'POST', '/runs', { project: 'alpha', experiment: 'e1' });
    runA = (sdk.json() as { id: string }).id;
    ckpt = newId('ckpt');
    await database.db.insert(checkpoints).values({ id: ckpt, runId: runJ, jobId: jobJ, attempt: 1, uri: 'file:///x/step-1', fingerprint: 'f', step: 1 } as typeof checkpoints.$inferInsert);
    evalId = newId('eval');
    await database.db.insert(evaluations).values({ id: evalId, checkpointId: ckpt, status: 'pending' } as typeof evaluations.$inferInsert);
    fingerprint = await dbFingerprinter(database.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const octet = { 'content-type': 'application/octet-stream' };
  const routes = (): [string, string, unknown, Need, Record<string, string>?][] => [
    ['GET', '/health', undefined, { access: 'open' }],
    ['GET', '/whoami', undefined, { access: 'any', everyone: true }],
    ['GET', '/nodes', undefined, { access: 'any' }],
    ['GET', '/nodes/node-a', undefined, { access: 'any' }],
    // A node's Python environments: its agent reports them (its own node only), admins read them.
    ['GET', '/nodes/node-a/envs', undefined, { access: 'admin' }],
    ['PUT', '/nodes/node-a/envs', { bound_bytes: 1024, envs: [] }, { access: 'admin', node: true }],
    ['GET', '/jobs', undefined, { access: 'any' }],
    ['GET', '/jobs/counts', undefined, { access: 'any' }],
    ['GET', '/runs/counts', undefined, { access: 'any' }],
    ['GET', '/runs', undefined, { access: 'any' }],
    ['GET', `/runs?job=${jobJ}`, undefined, { access: 'read' }],
    ['GET', '/tokens', undefined, { access: 'admin' }],
    ['POST', '/tokens', { name: 'x', role: 'admin' }, { access: 'admin' }],
    ['DELETE', '/tokens/tok-nosuchtoken1', undefined, { access: 'admin' }],
    ['GET', '/quotas', undefined, { access: 'any' }],
    ['PUT', '/projects/alpha/quota', { gpus: 2 }, { access: 'admin' }],
    ['DELETE', '/projects/alpha/quota', undefined, { access: 'admin' }],
    ['POST', '/jobs', { command: ['true'], project: 'alpha' }, { access: 'write' }],
    ['GET', `/jobs/${jobJ}`, undefined, { access: 'read' }],
    ['GET', `/jobs/${jobJ}/events`, undefined, { access: 'read' }],
    ['GET', `/jobs/${jobJ}/logs`, undefined, { access: 'read' }],
    ['GET', `/jobs/${jobJ}/logs/refs?attempt=1`, undefined, { access: 'read', node: true }],
    ['POST', `/jobs/${jobJ}/attempts/1/logs/stdout?offset=0`, 'hello\n', { access: 'admin', node: true }, octet],
    ['POST', `/jobs/${jobJ}/cancel`, {}, { access: 'write' }],
    ['POST', `/jobs/${jobJ}/retry`, {}, { access: 'write' }],
    ['POST', '/runs', { project: 'alpha' }, { access: 'write' }],
    ['GET', `/runs/${runA}`, undefined, { access: 'read' }],
    ['GET', `/runs/${runJ}`, undefined, { access: 'read', run: true }],
    ['PATCH', `/runs/${runJ}`, { tags: { a: 'b' } }, { access: 'write', run: true }],
    ['POST', `/runs/${runJ}/heartbeat`, {}, { access: 'write', run: true }],
    ['POST', `/runs/${runJ}/metrics`, { points: [{ key: 'loss', step: 1, value: 0.5 }] }, { access: 'write', run: true }],
    ['GET', `/runs/${runJ}/metrics`, undefined, { access: 'read', run: true }],
    ['POST', `/runs/${runJ}/events`, { kind: 'note', message: 'hi' }, { access: 'write', run: true }],
    ['GET', `/runs/${runJ}/events`, undefined, { access: 'read', run: true }],
    ['POST', `/runs/${runA}/metrics`, { points: [{ key: 'loss', step: 1, value: 0.5 }] }, { access: 'write' }],
    ['POST', `/runs/${runA}/finish`, {}, { access: 'write' }],
    ['GET', `/runs/${runJ}/logs`, undefined, { access: 'read' }],
    ['GET', `/metrics/compare?runs=${runA},${runJ}`, undefined, { access: 'read' }],
    ['GET', '/primary-metric?project=alpha', undefined, { access: 'read' }],
    ['PUT', '/projects/alpha/primary-metric', { name: 'eval/acc', goal: 'max' }, { access: 'write' }],
    ['DELETE', '/projects/alpha/primary-metric', undefined, { access: 'write' }],
    ['PUT', '/projects/alpha/experiments/e1/primary-metric', { name: 'eval/acc', goal: 'max' }, { access: 'write' }],
    ['DELETE', '/projects/alpha/experiments/e1/primary-metric', undefined, { access: 'write' }],
    ['GET', '/projects/alpha/experiments/e1/retention', undefined, { access: 'read' }],
    ['PUT', '/projects/alpha/experiments/e1/retention', { keep_best: 1, keep_latest: 1 }, { access: 'write' }],
    ['GET', '/checkpoints?project=alpha', undefined, { access: 'read' }],
    ['GET', `/checkpoints?run=${runJ}`, undefined, { access: 'read' }],
    ['GET', '/checkpoints/best?project=alpha', undefined, { access: 'read' }],
    ['GET', `/checkpoints/${ckpt}`, undefined, { access: 'read' }],
    ['GET', `/checkpoints/${ckpt}/evaluations`, undefined, { access: 'read' }],
    ['POST', `/checkpoints/${ckpt}/evaluations`, { command: ['true'] }, { access: 'write' }],
    ['POST', `/checkpoints/${ckpt}/fork`, { params: { lr: 0.1 } }, { access: 'write' }],
    ['GET', `/lineage?run=${runJ}`, undefined, { access: 'read' }],
    ['GET', `/lineage?checkpoint=${ckpt}`, undefined, { access: 'read' }],
    ['GET', `/evaluations/${evalId}`, undefined, { access: 'read' }],
  ];

  /** Whether a route names a resource of project alpha by id: a token that may not read alpha gets that id's 404, as for an unknown one. */
  const namesAlphaId = (url: string) => [jobJ, runJ, runA, ckpt, evalId].some((id) => url.includes(id));

  function expected(who: Who, need: Need, url: string): 'ok' | 401 | 403 | 404 {
    if (need.access === 'open') return 'ok';
    if (who === 'none' || who === 'bogus') return 401;
    if (who === 'admin' || need.everyone) return 'ok';
    if (who === 'nodeA') return need.node ? 'ok' : 403;
    if (who === 'nodeB') return 403;
    if (who === 'runJ') return need.run ? 'ok' : 403;
    if (need.access === 'any') return 'ok';
    if (need.access === 'admin') return 403;
    if (who === 'memberBeta') return namesAlphaId(url) ? 404 : 403;
    if (who === 'memberAlpha') return 'ok';
    return need.access === 'read' ? 'ok' : 403; // viewers
  }

  // Denied callers first, so the allowed ones (which change things) come after.
  const order: Who[] = ['none', 'bogus', 'memberBeta', 'viewerAlpha', 'starViewer', 'nodeB', 'nodeA', 'runJ', 'memberAlpha', 'admin'];
  it.each(order)('%s', async (who) => {
    const wrong: string[] = [];
    for (const [method, url, body, need, headers] of routes()) {
      const want = expected(who, need, url);
      const before = want === 'ok' ? '' : await fingerprint();
      const r = await call(who, method, url, body, headers);
      const got = r.statusCode;
      if (want === 'ok') {
        if (got === 401 || got === 403 || got >= 500) wrong.push(`${method} ${url}: ${got} ${r.body.slice(0, 200)} (want allowed)`);
        continue;
      }
      if (got !== want) wrong.push(`${method} ${url}: ${got} ${r.body.slice(0, 200)} (want ${want})`);
      else if (!(r.json() as { message?: string }).message) wrong.push(`${method} ${url}: ${got} without a message`);
      if ((await fingerprint()) !== before) wrong.push(`${method} ${url}: refused with ${got} but the database changed`);
    }
    expect(wrong).toEqual([]);
  });

  it('lists show a member only its projects; naming another project is 403', async () => {
    const alphaJobs = (await call('memberAlpha', 'GET', '/jobs')).json() as { jobs: { id: string }[] };
    expect(alphaJobs.jobs.map((j) => j.id)).toContain(jobJ);
    const betaJobs = (await call('memberBeta', 'GET', '/jobs')).json() as { jobs: { id: string }[] };
    expect(betaJobs.jobs).toEqual([]);
    expect((await call('memberBeta', 'GET', '/runs')).json()).toEqual({ runs: [] });
    expect(((await call('memberBeta', 'GET', '/jobs/counts')).json() as { total: number }).total).toBe(0);
    expect((await call('memberBeta', 'GET', '/runs/counts')).json()).toEqual({ experiments: [] });
    expect((await call('memberBeta', 'GET', '/jobs?project=alpha')).statusCode).toBe(403);
    expect((await call('starViewer', 'GET', '/jobs?project=alpha')).statusCode).toBe(200);
  });

  it('a member cannot submit a job of no project or of another project', async () => {
    const before = await fingerprint();
    const none = await call('memberAlpha', 'POST', '/jobs', { command: ['true'] });
    expect(none.statusCode).toBe(403);
    expect(none.json().message).toMatch(/no project/);
    expect((await call('memberAlpha', 'POST', '/jobs', { command: ['true'], project: 'beta' })).statusCode).toBe(403);
    expect(await fingerprint()).toBe(before);
  });

  it('a run token may not write another run, even of its own job', async () => {
    const other = runToken(tokens.nodeB ?? newToken(), runJ, 1);
    const r = await app.inject({ method: 'POST', url: `/api/v1/runs/${runJ}/heartbeat`, headers: { authorization: `Bearer ${other}` }, payload: {} });
    expect(r.statusCode).toBe(401);
    const forged = await app.inject({ method: 'POST', url: `/api/v1/runs/${runA}/heartbeat`, headers: { authorization: `Bearer ${tokens.runJ}` }, payload: {} });
    expect(forged.statusCode).toBe(403);
  });

  it('the live stream names changed ids to an unrestricted token only', async () => {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    // node:http, not fetch: the request is destroyed when the test has read enough, so its socket
    // closes. An aborted fetch left its keep-alive socket open, and app.close() in afterAll then
    // waited out Fastify's keep-alive timeout (72 s) for it.
    const firstChange = async (who: Who) => {
      let req: http.ClientRequest | undefined;
      const poke = setInterval(() => void call('admin', 'POST', `/runs/${runA}/events`, { kind: 'note', message: 'poke' }), 700);
      try {
        return await new Promise<{ run_ids: string[]; truncated: boolean }>((resolve, reject) => {
          req = http.get(`http://127.0.0.1:${port}/api/v1/stream`, { headers: { authorization: `Bearer ${tokens[who]}` } }, (res) => {
            if (res.statusCode !== 200) reject(new Error(`GET /stream: ${res.statusCode}`));
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              text += d;
              const m = /event: change\ndata: (.*)\n/.exec(text);
              if (m) resolve(JSON.parse(m[1]) as { run_ids: string[]; truncated: boolean });
            });
            res.on('end', () => reject(new Error(`stream ended: ${text}`)));
          });
          req.on('error', reject);
        });
      } finally {
        clearInterval(poke);
        req?.destroy();
      }
    };
    const admin = await firstChange('admin');
    expect(admin.run_ids).toContain(runA);
    const viewer = await firstChange('viewerAlpha');
    expect(viewer).toMatchObject({ run_ids: [], job_ids: [], truncated: true });
  });

  it('a malformed Authorization header is 401 with how to send one', async () => {
    const r = await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Token ${admin}` } });
    expect(r.statusCode).toBe(401);
    expect(r.json().message).toMatch(/Bearer/);
  });

  it('token admin: bad bodies are 400 and change nothing; a revoked token is refused at once', async () => {
    const before = await fingerprint();
    for (const body of [{ name: 'n', role: 'node' }, { name: 'n', role: 'member' }, { name: 'n', role: 'admin', projects: ['a'] }, { name: 'n', role: 'viewer', projects: ['a'], node_id: 'x' }, { name: 'n', role: 'root' }]) {
      const r = await call('admin', 'POST', '/tokens', body);
      expect(r.statusCode, JSON.stringify(body)).toBe(400);
    }
    expect(await fingerprint()).toBe(before);
    const made = (await call('admin', 'POST', '/tokens', { name: 'temp', role: 'viewer', projects: ['*'] })).json() as { id: string; token: string };
    const list = (await call('admin', 'GET', '/tokens')).json() as { tokens: Record<string, unknown>[] };
    expect(JSON.stringify(list)).not.toContain(made.token);
    expect(list.tokens.every((t) => !('token' in t) && !('token_hash' in t))).toBe(true);
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${made.token}` } })).statusCode).toBe(200);
    expect((await call('admin', 'DELETE', `/tokens/${made.id}`)).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${made.token}` } })).statusCode).toBe(401);
  });
});

describe('node tokens and the pool', () => {
  it('revoking the last token of a node takes it out of the pool', async () => {
    const admin = newToken();
    const t = await startTestApp('auth-nodes', { temporal: false, auth: { adminTokens: [admin] } });
    const { app, database } = t;
    try {
      const headers = { authorization: `Bearer ${admin}` };
      const made = (await app.inject({ method: 'POST', url: '/api/v1/tokens', headers, payload: { name: 'c', role: 'node', node_id: 'node-c' } })).json() as { id: string };
      expect(await nodeHasToken(database.db, 'node-c')).toBe(true);
      await upsertNodeOnline(database.db, { nodeId: 'node-c', hostname: 'h', labels: {}, gpus: [] });
      expect((await app.inject({ method: 'DELETE', url: `/api/v1/tokens/${made.id}`, headers })).statusCode).toBe(200);
      expect(await nodeHasToken(database.db, 'node-c')).toBe(false);
      const [n] = await database.db.select().from(nodes).where(eq(nodes.id, 'node-c'));
      expect(n.status).toBe('OFFLINE');
    } finally {
      await t.close();
    }
  });
});

describe('made-up tokens', () => {
  it('an address that sends more than 100 unknown tokens a minute gets 429 before any lookup', async () => {
    const admin = newToken();
    const t = await startTestApp('auth-flood', { temporal: false, auth: { adminTokens: [admin] } });
    const { app } = t;
    try {
      // A token in use before the flood keeps working from the flooded address.
      expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${admin}` } })).statusCode).toBe(200);
      const statuses: number[] = [];
      for (let i = 0; i < 101; i++) statuses.push((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${newToken()}` } })).statusCode);
      expect(statuses.slice(0, 100).every((s) => s === 401)).toBe(true);
      const r = await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${newToken()}` } });
      expect(r.statusCode).toBe(429);
      expect(r.json()).toMatchObject({ error: 'rate_limited' });
      // From another address a good token still passes.
      expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', remoteAddress: '10.9.9.9', headers: { authorization: `Bearer ${admin}` } })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${admin}` } })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('sign-in links in logs', () => {
  it('a token in a URL never reaches a log line or an error message', async () => {
    const { loggableUrl } = await import('../api/request-log.ts');
    expect(loggableUrl('/?token=gpt_abc#/queue')).toBe('/?token=[redacted]#/queue');
    expect(loggableUrl('/x?a=1&TOKEN=gpt_abc&b=2')).toBe('/x?a=1&TOKEN=[redacted]&b=2');
    expect(loggableUrl('/api/v1/jobs?state=QUEUED')).toBe('/api/v1/jobs?state=QUEUED');
  });
});
