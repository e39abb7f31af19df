import fs from 'node:fs';
import path from 'node:path';
import type { JobJson } from '../../cli/api-types.ts';
import type { Cluster } from './cluster.ts';

/**
 * The first run of a fork test: `script` (a dependency-free node training script that saves a
 * checkpoint a step into ckpts/) written into a folder of its own and submitted as a TRAIN job of
 * 8 steps at lr 0.1, watching ckpts. Forks go to `forkExperiment`, which keeps each run's latest
 * checkpoint only.
 */
export async function submitForkBase(c: Cluster, o: { dir: string; script: string; project: string; forkExperiment: string; sleepMs: number }): Promise<{ job: JobJson; work: string }> {
  const work = path.join(c.work, o.dir);
  fs.mkdirSync(work, { recursive: true });
  fs.writeFileSync(path.join(work, 'train.mjs'), o.script);
  await c.client.request('PUT', `/projects/${o.project}/experiments/${o.forkExperiment}/retention`, { keep_best: null, keep_latest: 1 });
  const job = await c.client.submit({
    type: 'TRAIN',
    gpus: 1,
    project: o.project,
    experiment: 'base',
    working_dir: work,
    watch_dir: 'ckpts',
    params: { steps: 8, sleep_ms: o.sleepMs, lr: 0.1 },
    command: [process.execPath, 'train.mjs'],
  });
  return { job, work };
}
