/**
 * bench/store, LOST → resumed elsewhere: a whole cluster whose agents live on isolated nodes
 * (runtime/isolated-nodes.ts: subnet 38, job users 3800300-3800399) and store checkpoints in a
 * real S3 server (versitygw, reached across the nodes' bridge). A TRAIN job on node A writes one
 * checkpoint folder of `--lost-size-mib` MiB on A's own scratch disk, which A's agent uploads;
 * once it is stored, A is killed whole (agent, job and all). The job is LOST after the lost-after
 * time, re-queued onto node B, whose agent fetches the checkpoint into its cache (one GET streamed
 * into the packer, which unpacks and hashes it) before the attempt's process starts.
 *
 * Times are from the kill, on this machine's clock (every process of the cluster runs here): the
 * transitions of the job's history (LOST, DISPATCHING, RUNNING), the `checkpoint.fetched` event
 * (its time, less the fetch's own duration, is when the fetch began), and the resumed process's
 * first line, which writes its start time and the resume point it was given into a shared folder.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { NODE_SCRATCH } from '../runtime/isolated-nodes.ts';
import { startS3Server } from '../runtime/s3-server.ts';
import { startCluster } from '../test/support/cluster.ts';
import { jobUsersSkipReason } from '../test/support/job-users.ts';
import { until } from '../test/support/poll.ts';
import { freePort } from '../test/support/ports.ts';
import { startSharedServices } from '../test/support/services.ts';
import { HB_S, LOST_AFTER_S, LOST_SIZE_MIB, note } from './store-setup.ts';

const SUBNET = 38;
const JOB_USERS = '3800300-3800399';

/**
 * The job: records when it started and what it resumes from; the first attempt then writes the
 * checkpoint (4 files of random bytes), and every attempt waits to be killed or cancelled.
 */
const JOB = `
import json, os, sys, time
start = time.time()
marks, mib = sys.argv[1], int(sys.argv[2])
resume = os.environ.get('GPUPLANE_RESUME_FROM')
seen = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(resume) for f in fs) if resume else 0
attempt = os.environ['GPUPLANE_ATTEMPT']
with open(os.path.join(marks, attempt + '.tmp'), 'w') as f:
    json.dump({'start': start, 'resume_from': resume, 'resume_bytes': seen}, f)
os.rename(os.path.join(marks, attempt + '.tmp'), os.path.join(marks, attempt + '.json'))
if not resume:
    out = os.path.join('ckpts', 'step-1000')
    os.makedirs(out)
    block = bytearray(os.urandom(16 << 20))
    n = 0
    for i in range(4):
        with open(os.path.join(out, 'shard-%d.bin' % i), 'wb') as f:
            for _ in range((mib << 20) // 4 // len(block)):
                block[0:4] = n.to_bytes(4, 'little')
                n += 1
                f.write(block)
while True:
    time.sleep(60)
`;

interface Transition {
  attempt: number;
  from: string | null;
  to: string;
  at: string;
}
interface Detail {
  state: string;
  attempt: number;
  node_id: string | null;
  attempts: { attempt: number; state: string; node_id: string | null }[];
  history: Transition[];
}

export async function lostResume(work: string) {
  const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces');
  if (skip) throw new Error(`bench/store --part lost: ${skip}`);
  fs.mkdirSync(work, { recursive: true });
  const services = await startSharedServices('store-lost');
  const s3 = await startS3Server({ dir: path.join(work, 's3'), host: '0.0.0.0', port: await freePort(), accessKeyId: 'bench-lost', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['ckpts'] });
  const storage = { ...s3.env(), GPUPLANE_S3_ENDPOINT: s3.endpoint.replace('127.0.0.1', `10.233.${SUBNET}.1`), GPUPLANE_STORAGE: 's3://ckpts/plane' };
  const agentEnv = { GPUPLANE_JOB_USERS: JOB_USERS };
  note(`  lost: cluster on isolated nodes (subnet ${SUBNET}), heartbeat timeout ${HB_S} s, lost-after ${LOST_AFTER_S} s`);
  const c = await startCluster('storelost', { isolate: { subnet: SUBNET }, env: storage, heartbeatTimeoutS: HB_S, lostAfterS: LOST_AFTER_S, agents: [{ nodeId: 'sl-a', gpus: 1, env: agentEnv }] }, services);
  try {
    const marks = path.join(c.work, 'marks');
    fs.mkdirSync(marks, { mode: 0o1777 });
    fs.chmodSync(marks, 0o1777);
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'bench-store',
      working_dir: `${NODE_SCRATCH}/bench-store`,
      watch_dir: 'ckpts',
      command: ['python3', '-c', JOB, marks, String(LOST_SIZE_MIB)],
    });
    const stored = await until(
      'the checkpoint stored',
      async () => {
        const k = (await c.client.request<{ checkpoints: { id: string; storage: string | null; stored_bytes: number | null }[] }>('GET', '/checkpoints?project=bench-store')).checkpoints;
        if (k.some((x) => x.storage === 'failed')) throw new Error(`a checkpoint failed to store: ${JSON.stringify(k)}`);
        return k.find((x) => x.storage === 'stored') ?? null;
      },
      300_000,
      250,
    );
    note(`  lost: checkpoint ${stored.id} stored (${stored.stored_bytes} bytes); adding node sl-b and killing sl-a`);
    // Node B joins only now, so that the job is not placed there first.
    await c.addAgent({ nodeId: 'sl-b', gpus: 1, env: agentEnv });
    const killedAt = Date.now();
    await c.nodes.get('sl-a')!.kill();
    const second = path.join(marks, '2.json');
    await until('attempt 2 started on node sl-b', () => fs.existsSync(second), (LOST_AFTER_S + 180) * 1000, 100);
    const mark = JSON.parse(fs.readFileSync(second, 'utf8')) as { start: number; resume_from: string | null; resume_bytes: number };
    const detail = await until(
      'attempt 2 RUNNING',
      async () => {
        const d = await c.client.request<Detail>('GET', `/jobs/${job.id}`);
        return d.history.some((h) => h.attempt === 2 && h.to === 'RUNNING') ? d : null;
      },
      60_000,
      200,
    );
    const events = (await c.client.request<{ events: { kind: string; attempt: number | null; message: string; at: string }[] }>('GET', `/jobs/${job.id}/events`)).events;
    const fetched = events.find((e) => e.kind === 'checkpoint.fetched' && e.attempt === 2);
    const at = (t: string | number) => ((typeof t === 'number' ? t : Date.parse(t)) - killedAt) / 1000;
    const when = (attempt: number, to: string) => {
      const h = detail.history.find((x) => x.attempt === attempt && x.to === to);
      return h ? at(h.at) : NaN;
    };
    const m = fetched ? /\((\d+) bytes in ([\d.]+) s\)/.exec(fetched.message) : null;
    if (!fetched || !m) throw new Error(`attempt 2 has no fetch event: ${JSON.stringify(events.filter((e) => e.attempt === 2))}`);
    const fetchS = Number(m[2]);
    const started = at(mark.start * 1000);
    const steps: [string, number][] = [
      ['attempt 1 LOST (lost detection)', when(1, 'LOST')],
      ['attempt 2 DISPATCHING on the other node (re-queue, placement)', when(2, 'DISPATCHING')],
      ['fetch began (agent took the attempt, checked its user and folder)', at(fetched.at) - fetchS],
      [`checkpoint fetched and unpacked (${m[1]} bytes in ${fetchS} s, ${(Number(m[1]) / 1e6 / fetchS).toFixed(0)} MB/s, one stream)`, at(fetched.at)],
      ['attempt 2 RUNNING recorded (the agent spawned it and told the API)', when(2, 'RUNNING')],
      ['resumed process start (its first line)', started],
    ];
    steps.sort((a, b) => a[1] - b[1]);
    await c.client.cancel(job.id);
    return {
      job: job.id,
      checkpoint: stored.id,
      stored_bytes: stored.stored_bytes,
      lost_after_s: LOST_AFTER_S,
      heartbeat_timeout_s: HB_S,
      resumed_on: detail.node_id,
      resume_from: mark.resume_from,
      resume_bytes: mark.resume_bytes,
      fetch_event: fetched.message,
      running_recorded_s: when(2, 'RUNNING'),
      steps,
      resumed_s: started,
    };
  } finally {
    await c.stop();
    await s3.stop();
    await services.stop();
  }
}
