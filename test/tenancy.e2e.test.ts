import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { inject } from 'vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const SECRET = `beta-secret-${randomBytes(6).toString('hex')}`;

const skip = jobUsersSkipReason("jobs run as the agent's own user (single-tenant), nothing to isolate");

/**
 * What a job of project alpha finds on a node where a job of project beta runs, with a secret
 * variable and a run token. Runs as the job: prints one JSON object.
 */
const SCANNER = String.raw`
import json, os, socket, sys
# The needles come hex-encoded, so that this process's own command line does not hold them.
secret, admin = (bytes.fromhex(a).decode() for a in sys.argv[1:3])
beta_dir, home, temporal_port, pg_port, api_port = sys.argv[3:8]
found = {"uid": os.getuid(), "secret": [], "foreign_tokens": [], "readable": [], "connects": {}, "pids_seen": 0}
own = os.environ.get("GPUPLANE_TOKEN", "")
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    found["pids_seen"] += 1
    for f in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{f}", "rb").read().decode("utf8", "replace")
        except Exception:
            continue
        if secret in data:
            found["secret"].append(f"/proc/{pid}/{f}")
        if admin in data:
            found["foreign_tokens"].append(f"/proc/{pid}/{f}: admin")
        for word in data.replace("\0", " ").replace("=", " ").split():
            if word.startswith(("gpt_", "gpr_")) and word != own:
                found["foreign_tokens"].append(f"/proc/{pid}/{f}")
def walk(top):
    try:
        entries = os.listdir(top)
    except Exception:
        return
    found["readable"].append(top)
    for e in entries:
        p = os.path.join(top, e)
        if os.path.isdir(p) and not os.path.islink(p):
            walk(p)
        else:
            try:
                data = open(p, "rb").read()
                found["readable"].append(p)
                if secret.encode() in data:
                    found["secret"].append(p)
            except Exception:
                pass
walk(beta_dir)
walk(home)
for name, port in (("temporal", temporal_port), ("postgres", pg_port), ("api", api_port)):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", int(port)))
        found["connects"][name] = "open"
    except Exception as e:
        found["connects"][name] = type(e).__name__
    finally:
        s.close()
print(json.dumps(found))
`;

/**
 * Issue 28, section 1: on an agent running as root, a job of one project reaches nothing of
 * another project's, nor the agent's credentials, nor the control plane's ports.
 */
describe.skipIf(skip !== null)('tenancy on a node whose agent is root', () => {
  let c: Cluster;
  beforeAll(async () => {
    // Job uids of its own: agents claim theirs machine-wide (issue 40), and gpuctl up in another
    // file (readme-tour.e2e) may hold the default pool. The suite's PostgreSQL is the plane's database: protected.
    c = await startCluster('tenancy', { agents: [{ nodeId: 'tenant-node', gpus: 2, env: { GPUPLANE_JOB_USERS: '3200000-3200099', GPUPLANE_PROTECT: `127.0.0.1:${inject('pgPort')}` } }] });
  });
  afterAll(async () => {
    await c?.stop();
    // The agent detached (its default on-stop): its guard stays for a successor; none comes.
    if (!skip) execFileSync('nft', ['delete', 'table', 'inet', 'gpuplane_tenant_node'], { stdio: 'ignore' });
  });

  it('a job of one project finds no other project\'s secret, token or files, no agent credential, and cannot open Temporal or PostgreSQL', async () => {
    const tag = randomBytes(4).toString('hex');
    // Folders that do not exist yet: each job's user makes its own (0700).
    const betaDir = `/tmp/gpuplane-tenancy-${tag}-beta`;
    const alphaDir = `/tmp/gpuplane-tenancy-${tag}-alpha`;
    const beta = await c.client.submit({
      type: 'TRAIN',
      project: 'beta',
      command: ['sh', '-c', `echo "$B_SECRET" > mine.txt; echo "$GPUPLANE_TOKEN" > token.txt; exec sleep 120`],
      secret_env: { B_SECRET: SECRET },
      working_dir: betaDir,
      selector: {},
      gpus: 1,
    });
    await until('beta running', async () => (await c.client.job(beta.id)).state === 'RUNNING' && fs.existsSync(path.join(betaDir, 'token.txt')), 60_000);
    const temporalPort = c.env.TEMPORAL_ADDRESS!.split(':')[1];
    const apiPort = new URL(c.apiUrl).port;
    const alpha = await c.client.submit({
      type: 'TRAIN',
      project: 'alpha',
      command: ['sh', '-c', 'python3 -c "$SCANNER" "$@" > report.json', 'scan', Buffer.from(SECRET).toString('hex'), Buffer.from(c.token).toString('hex'), betaDir, c.home, temporalPort, String(inject('pgPort')), apiPort],
      env: { SCANNER },
      working_dir: alphaDir,
      selector: {},
      gpus: 1,
    });
    const done = await c.client.waitFor(alpha.id, undefined, 90_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    const report = JSON.parse(fs.readFileSync(path.join(alphaDir, 'report.json'), 'utf8')) as {
      uid: number;
      secret: string[];
      foreign_tokens: string[];
      readable: string[];
      connects: Record<string, string>;
      pids_seen: number;
    };
    const betaUid = fs.statSync(path.join(betaDir, 'mine.txt')).uid;
    // Each project its own unprivileged user, from the agent's pool.
    expect(report.uid).toBeGreaterThanOrEqual(3_000_000);
    expect(betaUid).toBeGreaterThanOrEqual(3_000_000);
    expect(report.uid).not.toBe(betaUid);
    // Beta's secret is in beta's own file (the job has it), and alpha found it nowhere.
    expect(fs.readFileSync(path.join(betaDir, 'mine.txt'), 'utf8').trim()).toBe(SECRET);
    expect(report.secret).toEqual([]);
    expect(report.foreign_tokens).toEqual([]);
    expect(report.readable).toEqual([]);
    // Its own processes only (its shell, python): not the agent, the API, beta's job.
    expect(report.pids_seen).toBeLessThanOrEqual(3);
    expect(report.connects.temporal).toBe('ConnectionRefusedError');
    expect(report.connects.postgres).toBe('ConnectionRefusedError');
    // The API stays open to jobs: they report through it.
    expect(report.connects.api).toBe('open');
    // The folders are the jobs' own.
    expect(fs.statSync(betaDir).uid).toBe(betaUid);
    expect(fs.statSync(betaDir).mode & 0o077).toBe(0);

    await c.client.cancel(beta.id);
    const ended = await c.client.waitFor(beta.id, undefined, 60_000);
    expect(ended.state).toBe('CANCELLED');
    // The guard stays while the agent does.
    expect(execFileSync('nft', ['list', 'tables'], { encoding: 'utf8' })).toContain('gpuplane_tenant_node');
    fs.rmSync(betaDir, { recursive: true, force: true });
    fs.rmSync(alphaDir, { recursive: true, force: true });
  });

  it('a job user\'s exit status, cancel and a working dir it may not use are as with any job', async () => {
    const tag = randomBytes(4).toString('hex');
    const failed = await c.client.submit({ type: 'CUSTOM', project: 'alpha', command: ['sh', '-c', 'exit 3'], working_dir: `/tmp/gpuplane-tenancy-${tag}-exit`, selector: {}, gpus: 0 });
    const f = await c.client.waitFor(failed.id, undefined, 60_000);
    expect(f.state).toBe('FAILED');
    expect(f.reason).toMatch(/exit code 3/);
    // A job that traps SIGTERM gets it on cancel, and ends in its own time.
    const dir = `/tmp/gpuplane-tenancy-${tag}-term`;
    const trapping = await c.client.submit({ type: 'CUSTOM', project: 'alpha', command: ['sh', '-c', 'trap "echo got-term > term.txt; exit 0" TERM; echo up > up.txt; while :; do sleep 0.1; done'], working_dir: dir, selector: {}, gpus: 0 });
    await until('the trapping job up', () => fs.existsSync(path.join(dir, 'up.txt')), 60_000);
    await c.client.cancel(trapping.id);
    expect((await c.client.waitFor(trapping.id, undefined, 60_000)).state).toBe('CANCELLED');
    expect(fs.readFileSync(path.join(dir, 'term.txt'), 'utf8').trim()).toBe('got-term');
    // The plane's home is root's (0700): not a job user's working dir.
    const refused = await c.client.submit({ type: 'CUSTOM', project: 'alpha', command: ['true'], working_dir: c.home, selector: {}, gpus: 0 });
    const r = await c.client.waitFor(refused.id, undefined, 60_000);
    expect(r.state).toBe('FAILED');
    expect(r.reason).toMatch(/is not usable by the job's user gpuplane-3\d{6} \(uid 3\d{6}/);
    for (const d of ['exit', 'term']) fs.rmSync(`/tmp/gpuplane-tenancy-${tag}-${d}`, { recursive: true, force: true });
  });
});
