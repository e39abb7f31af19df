import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobJson, NodeJson } from '../cli/client.ts';
import { gpuctlPath } from './support/cluster.ts';
import { startGpuctlUp, type GpuctlUp } from './support/gpuctl-up.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';

const exec = promisify(execFile);

/**
 * Trying multi-node scheduling on one machine is one command: `gpuctl up --fake-nodes 3
 * --fake-gpus 4` runs three fake nodes in the embedded plane, each its own agent with its own id
 * and token, and two 2-card jobs submitted at once run side by side, one on each of two nodes.
 */
describe('gpuctl up --fake-nodes', () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-fake-nodes-'));
  // Where the jobs wait for each other: each writes its name, and both end once both are there.
  const meet = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-fake-nodes-meet-'));
  let up: GpuctlUp | null = null;
  let env: NodeJS.ProcessEnv = {};
  const gpuctl = async (...args: string[]) => (await exec(process.execPath, [gpuctlPath, ...args], { env, cwd: home })).stdout;

  beforeAll(async () => {
    const apiPort = await freePort();
    env = { ...process.env, GPUPLANE_HOME: home, GPUPLANE_API_URL: `http://127.0.0.1:${apiPort}`, GPUPLANE_LOG_LEVEL: 'warn' };
    for (const k of ['TEMPORAL_ADDRESS', 'DATABASE_URL', 'GPUPLANE_TOKEN', 'GPUPLANE_ADMIN_TOKEN', 'GPUPLANE_NODE_TOKEN']) delete env[k];
    // Ports of its own: never whatever answers on 7233 on this machine.
    up = await startGpuctlUp(
      ['--fake-nodes', '3', '--fake-gpus', '4', '--node-id', 'fk', '--port', String(apiPort), '--temporal-port', String(await freePort()), '--temporal-ui-port', String(await freePort())],
      env,
    );
  }, 200_000);
  afterAll(async () => {
    await up?.stop();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(meet, { recursive: true, force: true });
  });

  it('runs three ONLINE nodes with ids of their own, 4 cards each, a token and a data dir each; the banner names them', async () => {
    expect(up!.stdout()).toContain('\n  nodes        fk-1, fk-2, fk-3: 4 cards each (fake)\n');
    const nodes = await until(
      'three ONLINE nodes',
      async () => {
        const all = JSON.parse(await gpuctl('nodes', '--json')) as NodeJson[];
        return all.filter((n) => n.status === 'ONLINE').length === 3 ? all : null;
      },
      60_000,
      500,
    );
    expect(nodes.map((n) => n.id).sort()).toEqual(['fk-1', 'fk-2', 'fk-3']);
    for (const n of nodes) expect(n.gpus.map((g) => g.index)).toEqual([0, 1, 2, 3]);
    expect(fs.readdirSync(path.join(home, 'node-tokens'))).toHaveLength(3);
    expect(new Set(fs.readdirSync(path.join(home, 'node-tokens')).map((f) => fs.readFileSync(path.join(home, 'node-tokens', f), 'utf8'))).size).toBe(3);
    expect(fs.readdirSync(path.join(home, 'agent')).sort()).toEqual(['fk-1', 'fk-2', 'fk-3']);
  });

  it('runs two 4-card jobs submitted at once side by side, on two nodes', async () => {
    // Each job ends only once the other one runs too: they cannot take turns on one node.
    const job = (name: string) => `touch ${meet}/${name}; for i in $(seq 600); do [ -e ${meet}/a ] && [ -e ${meet}/b ] && exit 0; sleep 0.1; done; exit 1`;
    const ids = await Promise.all(['a', 'b'].map(async (name) => (await gpuctl('submit', '--gpus', '4', '--', 'sh', '-c', job(name))).trim().split('\n').at(-1)!));
    await Promise.all(ids.map((id) => gpuctl('wait', id).catch(() => '')));
    const jobs = JSON.parse(await gpuctl('jobs', '--json')) as JobJson[];
    const ran = ids.map((id) => jobs.find((j) => j.id === id)!);
    expect(ran.map((j) => j.state)).toEqual(['SUCCEEDED', 'SUCCEEDED']);
    expect(ran.map((j) => j.gpu_indices)).toEqual([
      [0, 1, 2, 3],
      [0, 1, 2, 3],
    ]);
    expect(new Set(ran.map((j) => j.node_id)).size).toBe(2);
  }, 120_000);

  it("the README's two-node job runs as written: both members meet, each rank's log is there", async () => {
    // The second bash block under "### Across nodes" (the first starts the plane, as this test did).
    const section = fs.readFileSync(path.resolve('README.md'), 'utf8').split('\n### Across nodes\n')[1].split('\n## ')[0];
    const block = [...section.matchAll(/```bash\n([\s\S]*?)```/g)][1][1];
    expect(block).toContain('--nodes 2');
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-fake-nodes-bin-'));
    fs.writeFileSync(path.join(bin, 'gpuctl'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(gpuctlPath)} "$@"\n`, { mode: 0o755 });
    const script = `set -eo pipefail\n${block}\necho "tour done: $id"\n`;
    const r = await exec('bash', ['-c', script], { env: { ...env, PATH: `${bin}:${env.PATH}` }, cwd: path.resolve('.') });
    const id = /tour done: (job-\S+)/.exec(r.stdout)![1];
    const j = JSON.parse(await gpuctl('job', id, '--json')) as JobJson & { members: { node_id: string }[] };
    expect(j.state).toBe('SUCCEEDED');
    expect(new Set(j.members.map((m) => m.node_id)).size).toBe(2);
    // `gpuctl job` lists the members; `gpuctl logs --rank 1` printed rank 1's line.
    expect(r.stdout).toMatch(/RANK\s+NODE\s+CARDS\s+PID\s+STARTED/);
    expect(r.stdout).toMatch(/"rank": 1, "nnodes": 2, "cards": "0,1,2,3"/);
    fs.rmSync(bin, { recursive: true, force: true });
  }, 120_000);

  it("the README's two projects sharing the cluster run as written: the project within its quota takes its cards back by preemption", async () => {
    const section = fs.readFileSync(path.resolve('README.md'), 'utf8').split('\n### Sharing the cluster\n')[1].split('\n## ')[0];
    const block = [...section.matchAll(/```bash\n([\s\S]*?)```/g)][0][1];
    expect(block).toContain('gpuctl quota set');
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-fake-nodes-bin-'));
    fs.writeFileSync(path.join(bin, 'gpuctl'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(gpuctlPath)} "$@"\n`, { mode: 0o755 });
    const r = await exec('bash', ['-c', `set -eo pipefail\n${block}\necho "tour done: $id"\n`], { env: { ...env, PATH: `${bin}:${env.PATH}` }, cwd: path.resolve('.') });
    fs.rmSync(bin, { recursive: true, force: true });
    expect(r.stdout).toMatch(/vision\s.*\b8\b.*\b12\b.*\b4\b/);
    const nlp = /tour done: (job-\S+)/.exec(r.stdout)![1];
    const jobs = (JSON.parse(await gpuctl('jobs', '--json', '--project', 'vision')) as JobJson[]).sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at));
    const fourth = jobs[3];
    type Detail = { attempts: { state: string; reason: string | null }[]; history: { to: string; at: string }[] };
    const detail = async (id: string) => JSON.parse(await gpuctl('job', id, '--json')) as Detail;
    const runningAt = async (id: string) => Date.parse((await detail(id)).history.find((h) => h.to === 'RUNNING')!.at);
    // The youngest of the three running took the borrowed cards: preempted for nlp's job, back as attempt 2.
    const third = await detail(jobs[2].id);
    expect(third.attempts[0].state).toBe('PREEMPTED');
    expect(third.attempts[0].reason).toBe(`preempted for job ${nlp}: project nlp is within its quota and takes back cards project vision borrowed`);
    for (const j of jobs.slice(0, 2)) expect((await detail(j.id)).attempts.map((a) => a.state)).not.toContain('PREEMPTED');
    // `gpuctl jobs --project vision` showed it back in the queue: attempt 2.
    expect(r.stdout).toMatch(new RegExp(`${jobs[2].id}\\s+TRAIN\\s+\\S+\\s+vision\\s+2\\s`));
    await gpuctl('wait', fourth.id);
    expect(await runningAt(nlp)).toBeLessThanOrEqual(await runningAt(fourth.id));
  }, 120_000);

  it('Ctrl-C stops every agent, then the rest, and exits 0', async () => {
    expect(await up!.stop()).toEqual({ code: 0, signal: null });
    expect(up!.stdout()).toMatch(/\nstopping GPUPlane\.\.\.\n(.*\n)*GPUPlane stopped\.\n$/);
  }, 60_000);
});
