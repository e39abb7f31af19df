import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardTableName } from '../activities/gpu-host/port-guard.ts';
import { claimUids, UID_CLAIMS_DIR, UidClaimConflict } from '../activities/gpu-host/uid-claim.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { startGpuctlUp } from './support/gpuctl-up.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const skip = jobUsersSkipReason("jobs run as the agent's own user, no job uids to claim");

/**
 * Runs as a job: which of the hex-encoded needles it finds in any /proc/PID/environ or cmdline it
 * can read, and its uid. One JSON object.
 */
const SCANNER = String.raw`
import json, os, sys
needles = [bytes.fromhex(a).decode() for a in sys.argv[1:]]
found = {"uid": os.getuid(), "found": [[] for _ in needles]}
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    for f in ("environ", "cmdline"):
        try:
            data = open(f"/proc/{pid}/{f}", "rb").read().decode("utf8", "replace")
        except Exception:
            continue
        for i, n in enumerate(needles):
            if n in data:
                found["found"][i].append(f"/proc/{pid}/{f}")
print(json.dumps(found))
`;

const hex = (s: string) => Buffer.from(s).toString('hex');
const RANGE_A = '3300000-3300099';

/**
 * Issue 40, item 3: two planes on one machine, each with an agent running as root, never run
 * jobs as one uid: the second agent refuses a range overlapping the first's, and with ranges
 * apart, project `a` of one plane cannot read the environment (secret, run token) of project
 * `a` of the other.
 */
describe.skipIf(skip !== null)('two planes on one machine', () => {
  let a: Cluster;
  let b: Cluster;
  const tag = randomBytes(4).toString('hex');
  const dir = (n: string) => `/tmp/gpuplane-two-planes-${tag}-${n}`;
  beforeAll(async () => {
    [a, b] = await Promise.all([startCluster('uids-a', { agents: [{ nodeId: 'uids-a', gpus: 2, env: { GPUPLANE_JOB_USERS: RANGE_A } }] }), startCluster('uids-b', { agents: [] })]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    // The agents detach (their default on-stop): their guards stay for a successor; none comes.
    for (const n of ['uids-a', 'uids-b', 'uids-b-overlap']) {
      try {
        execFileSync('nft', ['delete', 'table', 'inet', guardTableName(n)], { stdio: 'ignore' });
      } catch {
        // Never made (the refused agent), or gone.
      }
    }
    for (const n of ['a1', 'a2', 'b1', 'b2']) fs.rmSync(dir(n), { recursive: true, force: true });
    // Their claims outlive them (stale, taken over by the next agent): this file's go with it.
    for (const f of ['3300000-3300099.json', '3300100-3300199.json']) {
      const held = path.join(UID_CLAIMS_DIR, f);
      if (fs.existsSync(held) && [a?.home, b?.home].some((h) => h && fs.readFileSync(held, 'utf8').includes(h))) fs.rmSync(held, { force: true });
    }
  });

  it('refuses a second agent whose job uids overlap the first\'s, in one line naming it and the flag', async () => {
    const err = await b.addAgent({ nodeId: 'uids-b-overlap', gpus: 1, env: { GPUPLANE_JOB_USERS: '3300050-3300149' } }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err).not.toBeNull();
    const line = err!.message.split('\n').find((l) => l.startsWith('gpuctl: '));
    expect(line).toMatch(
      new RegExp(`^gpuctl: job uids 3300050-3300149 overlap uids ${RANGE_A} claimed by another GPUPlane agent on this machine \\(data dir ${a.home}/agent/uids-a, pid \\d+\\): .*--job-users A-B \\(GPUPLANE_JOB_USERS\\)$`),
    );
  });

  it('with ranges apart, project a of each plane runs as its own uid and cannot read the other\'s environment', async () => {
    await b.addAgent({ nodeId: 'uids-b', gpus: 2, env: { GPUPLANE_JOB_USERS: '3300100-3300199' } });
    const secrets = { a: `plane-a-secret-${randomBytes(6).toString('hex')}`, b: `plane-b-secret-${randomBytes(6).toString('hex')}` };
    // Each plane: a job of project a holding a secret and its run token, running.
    const hold = (c: Cluster, secret: string, d: string) =>
      c.client.submit({ type: 'TRAIN', project: 'a', command: ['sh', '-c', 'echo "$GPUPLANE_TOKEN" > token.txt; exec sleep 120'], secret_env: { S: secret }, working_dir: d, selector: {}, gpus: 1 });
    const holders = await Promise.all([hold(a, secrets.a, dir('a1')), hold(b, secrets.b, dir('b1'))]);
    const token = (d: string) => fs.readFileSync(path.join(d, 'token.txt'), 'utf8').trim();
    await until('both holders running', () => [dir('a1'), dir('b1')].every((d) => fs.existsSync(path.join(d, 'token.txt')) && token(d).length > 0), 60_000);
    const tokens = { a: token(dir('a1')), b: token(dir('b1')) };
    // Then a scanner of project a on each plane: its own plane's secret (the same uid: a check
    // that it sees what it may), the other plane's secret and run token.
    const scan = (c: Cluster, own: string, otherSecret: string, otherToken: string, d: string) =>
      c.client.submit({ type: 'CUSTOM', project: 'a', command: ['sh', '-c', 'python3 -c "$SCANNER" "$@" > report.json', 'scan', hex(own), hex(otherSecret), hex(otherToken)], env: { SCANNER }, working_dir: d, selector: {}, gpus: 0 });
    const scanners = await Promise.all([scan(a, secrets.a, secrets.b, tokens.b, dir('a2')), scan(b, secrets.b, secrets.a, tokens.a, dir('b2'))]);
    const done = await Promise.all([a.client.waitFor(scanners[0].id, undefined, 60_000), b.client.waitFor(scanners[1].id, undefined, 60_000)]);
    for (const d of done) expect(d.state, d.reason ?? '').toBe('SUCCEEDED');
    type Report = { uid: number; found: [string[], string[], string[]] };
    const report = (d: string) => JSON.parse(fs.readFileSync(path.join(d, 'report.json'), 'utf8')) as Report;
    const [ra, rb] = [report(dir('a2')), report(dir('b2'))];
    const uidA = fs.statSync(path.join(dir('a1'), 'token.txt')).uid;
    const uidB = fs.statSync(path.join(dir('b1'), 'token.txt')).uid;
    // Each plane's project a: one uid of its own plane's range, and not the other's.
    expect(uidA).toBeGreaterThanOrEqual(3_300_000);
    expect(uidA).toBeLessThanOrEqual(3_300_099);
    expect(uidB).toBeGreaterThanOrEqual(3_300_100);
    expect(uidB).toBeLessThanOrEqual(3_300_199);
    expect([ra.uid, rb.uid]).toEqual([uidA, uidB]);
    // Each sees its own plane's job (same project, same user), and nothing of the other plane's.
    expect(ra.found[0].length).toBeGreaterThan(0);
    expect(rb.found[0].length).toBeGreaterThan(0);
    expect(ra.found.slice(1)).toEqual([[], []]);
    expect(rb.found.slice(1)).toEqual([[], []]);
    await Promise.all([a.client.cancel(holders[0].id), b.client.cancel(holders[1].id)]);
  });

  it('gpuctl up beside an agent that holds the default job uids takes the next free block of 1000, and gives it back when it stops', async () => {
    // Another agent on the default pool: this test process stands in for it (another file's
    // gpuctl up may hold it already, which is as good).
    const other = fs.mkdtempSync('/tmp/gpuplane-two-planes-other-');
    let held: ReturnType<typeof claimUids> | null = null;
    try {
      held = claimUids([[[3_000_000, 3_000_999]]], other, '--job-users');
    } catch (err) {
      if (!(err instanceof UidClaimConflict)) throw err;
    }
    const home = fs.mkdtempSync('/tmp/gpuplane-two-planes-up-');
    const apiPort = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, GPUPLANE_HOME: home, GPUPLANE_API_URL: `http://127.0.0.1:${apiPort}`, GPUPLANE_LOG_LEVEL: 'warn' };
    for (const k of ['TEMPORAL_ADDRESS', 'DATABASE_URL', 'GPUPLANE_TOKEN', 'GPUPLANE_ADMIN_TOKEN', 'GPUPLANE_NODE_TOKEN', 'GPUPLANE_JOB_USERS']) delete env[k];
    try {
      const up = await startGpuctlUp(['--fake-gpus', '1', '--node-id', 'uids-up', '--port', String(apiPort), '--temporal-port', String(await freePort()), '--temporal-ui-port', String(await freePort())], env);
      const block = /jobs run as one user per project \(uids (\d+)-(\d+)\)/.exec(up.output());
      const claimFile = block && path.join(UID_CLAIMS_DIR, `${block[1]}-${block[2]}.json`);
      const claimed = claimFile && fs.existsSync(claimFile) ? fs.readFileSync(claimFile, 'utf8') : '';
      const exit = await up.stop();
      expect(block, up.output().slice(-3000)).not.toBeNull();
      expect(Number(block![1])).toBeGreaterThanOrEqual(3_001_000);
      expect(Number(block![1]) % 1000).toBe(0);
      expect(Number(block![2])).toBe(Number(block![1]) + 999);
      // Its claim named its agent's data dir while it ran, and went with it.
      expect(claimed).toContain(`${home}/agent/uids-up`);
      expect(exit.code).toBe(0);
      expect(fs.existsSync(claimFile!)).toBe(false);
    } finally {
      held?.claim.release();
      fs.rmSync(home, { recursive: true, force: true });
      fs.rmSync(other, { recursive: true, force: true });
      try {
        execFileSync('nft', ['delete', 'table', 'inet', guardTableName('uids-up')], { stdio: 'ignore' });
      } catch {
        // Taken away by its agent on the way out.
      }
    }
  });
});
