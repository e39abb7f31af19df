import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const skip = jobUsersSkipReason('jobs run as the agent\'s own user: there is no job identity to hand out');
/** The plane's pool and both nodes' --job-users: used by no other test file. */
const JOB_USERS = '3800000-3800099';
const LAST = 3800099;

/**
 * One identity per project on every node (issue 43 part 2), on two isolated nodes (machines that
 * share nothing but the network and one shared folder): the control plane gives each project one
 * uid of its pool (GPUPLANE_JOB_USERS) and every node runs the project's jobs as it; an admin's
 * `project set-user` makes the files a job writes on the shared folder the mapped user's; a
 * project mapped to a uid the nodes' --job-users do not allow fails at once, naming why.
 */
describe.skipIf(skip)('one identity per project on every node', () => {
  let c: Cluster;
  let out: string;
  beforeAll(async () => {
    c = await startCluster('identity', {
      isolate: { subnet: 35 },
      controlEnv: { GPUPLANE_JOB_USERS: JOB_USERS },
      agents: ['idn-a', 'idn-b'].map((nodeId) => ({ nodeId, gpus: 1, env: { GPUPLANE_JOB_USERS: JOB_USERS } })),
    });
    out = path.join(c.work, 'out');
    fs.mkdirSync(out, { mode: 0o1777 });
    fs.chmodSync(out, 0o1777);
  });
  afterAll(async () => {
    await c?.stop();
  });

  /** Runs a job of `project` on `node` that writes its uid to a file on the shared folder; the file's owner and content. */
  const uidOn = async (project: string, node: string) => {
    const name = `${project}-${node}`;
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, project, selector: { node }, command: `id -u > ${out}/${name}` });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, `${name}: ${done.attempts.at(-1)?.reason ?? ''}`).toBe('SUCCEEDED');
    const file = path.join(out, name);
    return { said: Number(fs.readFileSync(file, 'utf8').trim()), owner: fs.statSync(file).uid };
  };

  it("one project's jobs run as one uid on both nodes, another project's as another, both from the plane's pool", async () => {
    const [a1, a2, b1] = [await uidOn('alpha', 'idn-a'), await uidOn('alpha', 'idn-b'), await uidOn('beta', 'idn-b')];
    expect(a1.said).toBe(a2.said);
    expect(a1.owner).toBe(a1.said);
    expect(a2.owner).toBe(a1.said);
    expect(b1.said).not.toBe(a1.said);
    for (const u of [a1.said, b1.said]) {
      expect(u).toBeGreaterThanOrEqual(3800000);
      expect(u).toBeLessThanOrEqual(LAST);
    }
    const listed = await c.client.request<{ projects: { project: string; identity: { uid: number; source: string } | null }[] }>('GET', '/projects');
    expect(listed.projects.find((p) => p.project === 'alpha')?.identity).toMatchObject({ uid: a1.said, source: 'pool' });
    expect(listed.projects.find((p) => p.project === 'beta')?.identity).toMatchObject({ uid: b1.said, source: 'pool' });
  });

  it("project set-user: the job's files on the shared folder belong to the mapped user, on either node", async () => {
    await c.client.request('PUT', '/projects/gamma/job-user', { uid: LAST });
    for (const node of ['idn-a', 'idn-b']) expect(await uidOn('gamma', node)).toEqual({ said: LAST, owner: LAST });
  });

  it('a project mapped to a uid the nodes may not use fails at once with that reason, never retried', async () => {
    await c.client.request('PUT', '/projects/delta/job-user', { uid: 4200000 });
    const started = Date.now();
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, project: 'delta', command: 'true' });
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.state).toBe('FAILED');
    expect(done.attempt).toBe(1);
    const reason = done.attempts.at(-1)?.reason ?? '';
    expect(reason).toContain('project delta runs as uid 4200000 (gid 4200000; set by an admin), which this node may not use');
    expect(reason).toContain(`--job-users (GPUPLANE_JOB_USERS) is uids ${JOB_USERS}; add uid 4200000 to it`);
    expect(reason.split('\n')).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
