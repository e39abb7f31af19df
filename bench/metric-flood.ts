/**
 * bench/metric-flood (issue 39, 4): one tenant's run token writes metric points as fast as it
 * can; how long another project's job takes from submit to RUNNING, against the same plane idle.
 *
 *   node --import tsx bench/metric-flood.ts [--samples 15 --in-flight 4 --batch 10000 --shapes off,on,on-weight-off]
 *
 * Real processes (test/support/cluster.ts): a throwaway PostgreSQL and a Temporal dev server,
 * `gpuctl control-worker`, `gpuctl api` and one `gpuctl agent` with 4 fake cards. Per shape
 * (`off`: GPUPLANE_RUN_POINTS_PER_S=0 and GPUPLANE_PROJECT_POINTS_PER_S=0, the plane before the
 * limit; `on`: the defaults) a plane of its own:
 *
 * 1. idle: `--samples` one-card `true` jobs of project "quiet" (its member's token), one at a
 *    time; submit → RUNNING is the job's own history (CREATED to RUNNING, the API's clock);
 * 2. the flood: a TRAIN job of project "noisy" runs bench's flooder with the run token the agent
 *    gives it: `--in-flight` POSTs of `--batch` points to its run, each sent as soon as the last
 *    answer came, a 429 included (a hostile writer ignores Retry-After);
 * 3. the same samples again while it floods. Printed: both medians (and p90s), their ratio (the
 *    aim: within 2×), and the points a second the flooder got stored.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { GpuplaneClient } from '../cli/client.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { startSharedServices } from '../test/support/services.ts';
import { pct } from './dispatch-measures.ts';
import { runMain } from './run-main.ts';

const { values: args } = parseArgs({
  options: {
    samples: { type: 'string', default: '15' },
    'in-flight': { type: 'string', default: '4' },
    batch: { type: 'string', default: '10000' },
    shapes: { type: 'string', default: 'off,on,on-weight-off' },
  },
  strict: true,
});
const SAMPLES = Number(args.samples);
const IN_FLIGHT = Number(args['in-flight']);
const BATCH = Number(args.batch);

const say = (s: string) => process.stdout.write(`${s}\n`);
const ms = (x: number) => `${x.toFixed(0)} ms`;

/** The flooder, run as the noisy job: its stats go to stats.json every half second. */
const FLOODER = `
const e = process.env;
const url = e.GPUPLANE_API_URL + '/api/v1/runs/' + e.GPUPLANE_RUN_ID + '/metrics';
const headers = { authorization: 'Bearer ' + e.GPUPLANE_TOKEN, 'content-type': 'application/json' };
const batch = ${BATCH};
let step = 0;
const body = () => {
  const points = [];
  for (let i = 0; i < batch; i++) points.push({ key: 'k' + (i % 10), step: step + Math.floor(i / 10), value: Math.random() });
  step += batch / 10;
  return JSON.stringify({ points });
};
const stats = { stored: 0, ok: 0, refused: 0, other: 0, started: Date.now() };
const fs = await import('node:fs');
setInterval(() => fs.writeFileSync('stats.json', JSON.stringify({ ...stats, at: Date.now() })), 500);
const bodies = Array.from({ length: 8 }, body);
let n = 0;
async function lane() {
  for (;;) {
    try {
      const r = await fetch(url, { method: 'POST', headers, body: bodies[n++ % bodies.length] });
      await r.arrayBuffer();
      if (r.status === 200) { stats.ok++; stats.stored += batch; }
      else if (r.status === 429) stats.refused++;
      else stats.other++;
    } catch { stats.other++; }
  }
}
await Promise.all(Array.from({ length: ${IN_FLIGHT} }, lane));
`;

/** `SAMPLES` one-card `true` jobs of the quiet project, one at a time: submit → RUNNING of each, from the job's history. */
async function latencies(client: GpuplaneClient): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const j = await client.submit({ type: 'CUSTOM', project: 'quiet', gpus: 1, command: ['true'], working_dir: '/tmp' });
    const d = await client.waitFor(j.id, undefined, 120_000, 20);
    const at = (s: string) => new Date(d.history.find((h) => h.to === s)!.at).getTime();
    out.push(at('RUNNING') - at('CREATED'));
  }
  return out;
}

const summary = (xs: number[]) => `p50 ${ms(pct(xs, 50))}, p90 ${ms(pct(xs, 90))}`;

type Shape = 'off' | 'on' | 'on-weight-off';
/** The plane of each shape: the point limits off or on (the defaults); on-weight-off also gives jobs the kernel's CPU weight, not GPUPLANE_JOB_CPU_WEIGHT's 25. */
const SHAPES: Record<Shape, Record<string, string>> = {
  off: { GPUPLANE_RUN_POINTS_PER_S: '0', GPUPLANE_PROJECT_POINTS_PER_S: '0' },
  on: {},
  'on-weight-off': { GPUPLANE_JOB_CPU_WEIGHT: 'off' },
};

async function shape(name: Shape, services: Awaited<ReturnType<typeof startSharedServices>>): Promise<string> {
  const env = SHAPES[name];
  const c: Cluster = await startCluster(`flood-${name}`, { agents: [{ nodeId: 'f1', gpus: 4 }], env }, services);
  try {
    const quiet = new GpuplaneClient(c.apiUrl, { token: (await c.makeToken({ role: 'member', projects: ['quiet'] })).token });
    await latencies(quiet); // warm-up: first jobs pay for the cold paths
    const idle = await latencies(quiet);

    // The job runs as project noisy's own user: a folder it may enter and write (its stats).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-flood-job-'));
    fs.chmodSync(dir, 0o777);
    fs.writeFileSync(path.join(dir, 'flood.mjs'), FLOODER, { mode: 0o644 });
    const flood = await c.client.submit({ type: 'TRAIN', project: 'noisy', gpus: 1, working_dir: dir, command: [process.execPath, 'flood.mjs'] });
    const stats = () => JSON.parse(fs.readFileSync(path.join(dir, 'stats.json'), 'utf8')) as { stored: number; ok: number; refused: number; other: number; started: number; at: number };
    const deadline = Date.now() + 60_000;
    while (!fs.existsSync(path.join(dir, 'stats.json')) || stats().ok + stats().refused === 0) {
      if (Date.now() > deadline) {
        const d = await c.client.request<{ state: string; reason: string | null }>('GET', `/jobs/${flood.id}`);
        throw new Error(`the flooder did not start: ${d.state} ${d.reason ?? ''}; its log: ${await c.client.request('GET', `/jobs/${flood.id}/logs`).catch((e: Error) => e.message)}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 3000)); // the flood under way
    const before = stats();
    const flooded = await latencies(quiet);
    const after = stats();
    // The flooder ends before the plane does: an agent's jobs outlive its process.
    await c.client.request('POST', `/jobs/${flood.id}/cancel`, {});
    await c.client.waitFor(flood.id, undefined, 60_000);
    const secs = (after.at - before.at) / 1000;
    const line =
      `${name === 'on-weight-off' ? 'limits on, jobs at the kernel\'s CPU weight' : `limits ${name}`}: submit → RUNNING of project quiet, idle ${summary(idle)}; while a run token floods ${summary(flooded)}; ` +
      `ratio of medians ${(pct(flooded, 50) / pct(idle, 50)).toFixed(2)}× (aim ≤ 2×); the flooder got ${Math.round((after.stored - before.stored) / secs).toLocaleString('en-US')} points/s stored ` +
      `(${after.ok - before.ok} batches taken, ${after.refused - before.refused} refused with 429, ${after.other - before.other} other, over ${secs.toFixed(1)} s)`;
    say(line);
    return line;
  } finally {
    await c.stop();
  }
}

async function main() {
  say(`bench/metric-flood: ${SAMPLES} samples a phase, ${IN_FLIGHT} POSTs of ${BATCH} points in flight; ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB`);
  const services = await startSharedServices('bench-flood');
  try {
    for (const s of args.shapes.split(',')) {
      if (!(s in SHAPES)) throw new Error(`--shapes: ${s} is none of ${Object.keys(SHAPES).join(', ')}`);
      await shape(s as Shape, services);
    }
  } finally {
    await services.stop();
  }
}

runMain(main);
