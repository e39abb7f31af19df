/** bench/checkpoints, end to end: a job writes checkpoints on a real cluster; last write → registered row. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';
import { CHECKPOINTS, SIZE_MB, CHUNKS, GAP_S, DEBOUNCES, note, stats, ms } from './checkpoints-setup.ts';

const WRITER = `
import json, os, sys, time
out, log, release = sys.argv[1], sys.argv[2], sys.argv[3]
k, size, chunks, gap, wait_s = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
os.makedirs(out, exist_ok=True)
block = os.urandom(max(1, size // chunks))
with open(log, 'a', buffering=1) as lg:
    for i in range(1, k + 1):
        name = 'step_%d.pt' % (i * 100)
        # Unbuffered: each write() is one syscall, one inotify event.
        with open(os.path.join(out, name), 'wb', buffering=0) as f:
            for c in range(chunks):
                f.write(block if c < chunks - 1 else block + str(i).encode())
                if c < chunks - 1:
                    time.sleep(0.05)
            t = time.time()
        lg.write(json.dumps({'name': name, 'last_write': t}) + '\\n')
        time.sleep(gap)
# Stay alive until the bench saw every registration: no checkpoint goes to the final scan.
deadline = time.time() + wait_s
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.1)
`;

interface E2eRun {
  debounce_ms: number;
  job_id: string;
  checkpoints: number;
  latency_ms: ReturnType<typeof stats>;
  minus_debounce_ms: ReturnType<typeof stats>;
  minus_two_debounces_ms: ReturnType<typeof stats>;
  per_checkpoint: { name: string; last_write: number; registered: number; latency_ms: number }[];
  job_state: string;
}

async function e2eOne(c: Cluster, db: pg.Client, script: string, debounceMs: number): Promise<E2eRun> {
  const work = path.join(c.work, `d${debounceMs}`);
  fs.mkdirSync(work, { recursive: true });
  const log = path.join(work, 'last-writes.jsonl');
  const release = path.join(work, 'release');
  const writeS = CHECKPOINTS * ((CHUNKS - 1) * 0.05 + GAP_S);
  const waitS = writeS + 120;
  const job = await c.client.submit({
    type: 'TRAIN',
    gpus: 1,
    project: 'bench-checkpoints',
    working_dir: work,
    watch_dir: 'ckpts',
    selector: { debounce: String(debounceMs) },
    command: ['python3', script, path.join(work, 'ckpts'), log, release, String(CHECKPOINTS), String(Math.round(SIZE_MB * 2 ** 20)), String(CHUNKS), String(GAP_S), String(waitS)],
  });
  note(`  debounce ${debounceMs} ms: job ${job.id} submitted; ${CHECKPOINTS} checkpoints of ${SIZE_MB} MiB, ~${writeS.toFixed(0)} s of writing`);
  await c.client.waitFor(job.id, ['RUNNING'], 60_000);
  let lastNote = 0;
  const rowsOf = async () =>
    (await db.query<{ uri: string; at: string }>('select uri, extract(epoch from created_at)::float8 as at from checkpoints where job_id = $1', [job.id])).rows;
  const rows = await until(
    `${CHECKPOINTS} checkpoints registered`,
    async () => {
      const r = await rowsOf();
      if (Date.now() - lastNote > 5000) {
        lastNote = Date.now();
        const written = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
        note(`  debounce ${debounceMs} ms: ${written}/${CHECKPOINTS} written, ${r.length} registered`);
      }
      const d = await c.client.job(job.id);
      if (['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(d.state)) throw new Error(`job ${job.id} ended ${d.state} (${d.reason ?? ''}) with ${r.length} checkpoints registered`);
      return r.length >= CHECKPOINTS ? r : null;
    },
    (waitS + 60) * 1000,
    100,
  );
  fs.writeFileSync(release, '');
  const done = await c.client.waitFor(job.id, undefined, 60_000);
  const written = new Map(
    fs
      .readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { name: string; last_write: number })
      .map((w) => [w.name, w.last_write]),
  );
  const per = rows
    .map((r) => {
      const name = path.basename(r.uri);
      const lw = written.get(name);
      if (lw === undefined) throw new Error(`registered ${r.uri}, which the writer did not log`);
      return { name, last_write: lw, registered: Number(r.at), latency_ms: (Number(r.at) - lw) * 1000 };
    })
    .sort((a, b) => a.last_write - b.last_write);
  const lat = per.map((p) => p.latency_ms);
  return {
    debounce_ms: debounceMs,
    job_id: job.id,
    checkpoints: per.length,
    latency_ms: stats(lat),
    minus_debounce_ms: stats(lat.map((l) => l - debounceMs)),
    minus_two_debounces_ms: stats(lat.map((l) => l - 2 * debounceMs)),
    per_checkpoint: per,
    job_state: done.state,
  };
}

export async function e2e() {
  const t0 = performance.now();
  const services = await startSharedServices('bench-ckpt');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-ckpt-'));
  const script = path.join(scratch, 'write_checkpoints.py');
  fs.writeFileSync(script, WRITER);
  let c: Cluster | undefined;
  let db: pg.Client | undefined;
  try {
    c = await startCluster(
      'bench-ckpt',
      { agents: DEBOUNCES.map((d) => ({ nodeId: `ck-${d}`, gpus: 1, labels: { debounce: String(d) }, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: String(d) } })) },
      services,
    );
    note(`  cluster up in ${((performance.now() - t0) / 1000).toFixed(1)} s (one agent per debounce: ${DEBOUNCES.join(', ')} ms)`);
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
    const out: E2eRun[] = [];
    // One job at a time: the runs never share the cores.
    for (const d of DEBOUNCES) {
      const r = await e2eOne(c, db, script, d);
      note(`  debounce ${d} ms: p50 ${ms(r.latency_ms.p50)}, p99 ${ms(r.latency_ms.p99)} (job ${r.job_state})`);
      out.push(r);
    }
    return out;
  } finally {
    await db?.end();
    await c?.stop();
    await services.stop();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
