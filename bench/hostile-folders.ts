/**
 * bench/hostile-folders: what one job that floods its checkpoint folder costs everyone else.
 *
 * A plane (agent as root, job users) answers another project's `GET /jobs` for a quiet stretch,
 * then while a job of project alpha fills its watched folder with --entries empty files (default
 * 1,000,000) beside a symbolic-link loop. Prints the latency of those requests (median, p99, max)
 * in both stretches and their ratio, and the largest resident memory of the agent, the API and
 * the attempt's checkpoint scanner seen meanwhile.
 *
 *   node --import tsx bench/hostile-folders.ts [--entries 1000000] [--seconds 60]
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { GpuplaneClient } from '../cli/client.ts';
import { startCluster } from '../test/support/cluster.ts';
import { startSharedServices } from '../test/support/services.ts';

const { values: args } = parseArgs({ options: { entries: { type: 'string', default: '1000000' }, seconds: { type: 'string', default: '60' } } });
const ENTRIES = Number(args.entries);
const SECONDS = Number(args.seconds);
const say = (s: string) => process.stdout.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resident memory of a pid in MiB, or 0 when it is gone. */
function rssMiB(pid: number | undefined): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** The pids of running checkpoint scanners. */
function scannerPids(): number[] {
  try {
    return execFileSync('pgrep', ['-f', 'checkpoint-scanner.mjs'], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? 0;
const line = (name: string, xs: number[]) => `${name}: ${xs.length} requests, median ${quantile(xs, 0.5).toFixed(1)} ms, p99 ${quantile(xs, 0.99).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`;

async function timed(client: GpuplaneClient, seconds: number, sample: () => void): Promise<number[]> {
  const times: number[] = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const t0 = performance.now();
    await client.jobs({ project: 'beta', limit: 20 });
    times.push(performance.now() - t0);
    sample();
    await sleep(50);
  }
  return times;
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('bench/hostile-folders runs as root (an agent with job users)');
  const services = await startSharedServices('hostile-bench');
  const c = await startCluster('hostilebench', { agents: [{ nodeId: 'hostile-bench', gpus: 1, env: { GPUPLANE_JOB_USERS: '3500000-3500099', GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300' } }] }, services);
  const base = fs.mkdtempSync('/tmp/gpuplane-hostile-bench-');
  fs.chmodSync(base, 0o1777);
  const member = await c.makeToken({ role: 'member', projects: ['beta'] });
  const beta = new GpuplaneClient(c.apiUrl, { token: member.token });
  const agentPid = c.agents.get('hostile-bench')!.pid;
  const peak = { agent: 0, api: 0, scanner: 0 };
  const sample = () => {
    peak.agent = Math.max(peak.agent, rssMiB(agentPid));
    peak.api = Math.max(peak.api, rssMiB(c.api.pid));
    for (const p of scannerPids()) peak.scanner = Math.max(peak.scanner, rssMiB(p));
  };
  try {
    say(`bench/hostile-folders: ${ENTRIES} entries, ${SECONDS} s a stretch, 2-core machine, ${new Date().toISOString()}`);
    const idle = await timed(beta, SECONDS, sample);
    const idlePeak = { ...peak };
    const script = `mkdir -p ckpts/bomb && ln -s . ckpts/bomb/a && python3 -c 'import sys\nfor i in range(int(sys.argv[1])): open("ckpts/f%d" % i, "w").close()' ${ENTRIES} && sleep ${SECONDS * 2}`.replace('\\n', '\n');
    const job = await c.client.submit({ type: 'TRAIN', project: 'alpha', command: ['sh', '-c', script], working_dir: `${base}/alpha`, watch_dir: 'ckpts', selector: {}, gpus: 1 });
    const started = Date.now();
    while ((await c.client.job(job.id)).state !== 'RUNNING') {
      if (Date.now() - started > 60_000) throw new Error('the flooding job did not start');
      await sleep(200);
    }
    const loaded = await timed(beta, SECONDS, sample);
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/jobs/${job.id}/events`)).events.filter((e) => e.kind.startsWith('checkpoint.'));
    say(line('quiet', idle));
    say(line(`while a job writes ${ENTRIES} entries`, loaded));
    say(`p99 ratio (flooded / quiet): ${(quantile(loaded, 0.99) / quantile(idle, 0.99)).toFixed(2)}`);
    say(`peak RSS: agent ${idlePeak.agent.toFixed(0)} → ${peak.agent.toFixed(0)} MiB, API ${idlePeak.api.toFixed(0)} → ${peak.api.toFixed(0)} MiB, the attempt's scanner ${peak.scanner.toFixed(0)} MiB`);
    say(`files made in ${SECONDS} s: ${fs.existsSync(`${base}/alpha/ckpts`) ? fs.readdirSync(`${base}/alpha/ckpts`).length : 0}`);
    const runId = (await c.client.job(job.id)).attempts.at(-1)?.run_id;
    const registered = runId ? (await c.client.request<{ checkpoints: unknown[] }>('GET', `/checkpoints?run=${runId}&limit=1000`)).checkpoints.length : 0;
    say(`checkpoints registered before the watcher stopped: ${registered}${registered === 1000 ? ' or more' : ''}`);
    say(`the attempt's events: ${events.map((e) => `${e.kind}: ${e.message}`).join(' | ') || 'none'}`);
    await c.client.cancel(job.id);
  } finally {
    await c.stop();
    await services.stop();
    execFileSync('nft', ['delete', 'table', 'inet', 'gpuplane_hostile_bench'], { stdio: 'ignore' });
    fs.rmSync(base, { recursive: true, force: true });
  }
}

await main();
