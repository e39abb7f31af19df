/**
 * The node's unpacked code (docs/storage.md "Code snapshots"): each job that ran a snapshot here
 * has a folder of its own under /var/tmp/gpuplane-code, which would stay for ever. The agent asks
 * the control plane now and then which of those jobs are done with theirs (ended more than the
 * keep period ago, no checkpoint kept only there) and deletes those folders, each as its owner,
 * the job's user: never more than that user could delete itself.
 */
import fs from 'node:fs';
import path from 'node:path';
import { CODE_WORK_ROOT } from '../../domain/code-snapshot.ts';
import { codeInPreparation } from './code-fetch.ts';
import { deleteAs } from './scanner-client.ts';

/** How long a node keeps an ended job's unpacked code (GPUPLANE_CODE_WORKDIR_KEEP_S): 7 days. */
export const DEFAULT_CODE_WORKDIR_KEEP_S = 7 * 24 * 3600;

/** A job's folder name: what a job id looks like (anything else under the root is left alone). */
const JOB_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** GPUPLANE_CODE_WORKDIR_KEEP_S, or the default; throws one line naming it when it is not a whole number of seconds. */
export function codeWorkdirKeepS(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.GPUPLANE_CODE_WORKDIR_KEEP_S?.trim();
  if (!raw) return DEFAULT_CODE_WORKDIR_KEEP_S;
  if (!/^\d{1,9}$/.test(raw)) throw new Error(`GPUPLANE_CODE_WORKDIR_KEEP_S ${JSON.stringify(raw)}: not a whole number of seconds`);
  return Number(raw);
}

interface NodeApi {
  apiUrl: string;
  nodeId: string;
  nodeToken?: string;
}

/** Asks which of these jobs' folders this node may delete (POST /nodes/:id/code-workdirs/expired). */
async function expiredOf(api: NodeApi, jobs: string[], keepS: number): Promise<string[]> {
  const res = await fetch(`${api.apiUrl.replace(/\/$/, '')}/api/v1/nodes/${encodeURIComponent(api.nodeId)}/code-workdirs/expired`, {
    method: 'POST',
    headers: { authorization: `Bearer ${api.nodeToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ jobs, older_than_s: keepS }),
    signal: AbortSignal.timeout(15_000),
  });
  if (!res.ok) throw new Error(`the API answered ${res.status}`);
  return ((await res.json()) as { expired: string[] }).expired;
}

/**
 * One pass: the folders under `root` of the jobs the control plane says are done with them are
 * deleted, each entry as the folder's owner (the job's user) and only while it is the entry
 * listed, then the emptied folder itself; a job `busy` here (an attempt running), or whose code is being made ready, is skipped. Returns the jobs whose folders went; what could not go
 * is told to `warn` and asked about again next time.
 */
export async function sweepCodeWorkdirs(api: NodeApi, keepS: number, busy: (jobId: string) => boolean, warn: (msg: string) => void, root = CODE_WORK_ROOT): Promise<string[]> {
  let names: string[];
  try {
    names = fs.readdirSync(root);
  } catch {
    return [];
  }
  const jobs = names.filter((n) => JOB_ID.test(n)).slice(0, 1000);
  if (jobs.length === 0) return [];
  const gone: string[] = [];
  for (const id of await expiredOf(api, jobs, keepS)) {
    // An attempt of it running here, or its code being made ready (a retry since the answer): kept.
    if (!jobs.includes(id) || busy(id) || codeInPreparation.has(id)) continue;
    const dir = path.join(root, id);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (!st.isDirectory()) continue;
    const entries = fs.readdirSync(dir).flatMap((n) => {
      try {
        const e = fs.lstatSync(path.join(dir, n));
        return [{ uri: path.join(dir, n), inode: `${e.dev}:${e.ino}` }];
      } catch {
        return [];
      }
    });
    // As its owner: the job's user (the agent's own user where jobs run as it).
    const user = st.uid === process.getuid?.() ? null : { uid: st.uid, gid: st.gid };
    const r = await deleteAs(user, st.uid, dir, entries);
    if (r.refused.length) {
      warn(`the unpacked code of job ${id} was not all deleted: ${r.refused.map((x) => x.reason).join('; ')}`);
      continue;
    }
    try {
      fs.rmdirSync(dir);
      gone.push(id);
    } catch (err) {
      warn(`${dir} could not be removed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  return gone;
}

/** How often the agent looks: every hour, or twice a keep period shorter than two hours (at least every 2 s). */
export function codeWorkdirSweepEveryMs(keepS: number): number {
  return Math.min(3600_000, Math.max(2000, (keepS * 1000) / 2));
}

/** Sweeps now and then for as long as the agent runs; an API that does not answer is asked again next time. */
export async function keepSweepingCodeWorkdirs(api: NodeApi, keepS: number, busy: (jobId: string) => boolean, warn: (msg: string) => void, note: (msg: string) => void): Promise<never> {
  const everyMs = codeWorkdirSweepEveryMs(keepS);
  for (;;) {
    await new Promise((r) => setTimeout(r, everyMs).unref());
    try {
      const gone = await sweepCodeWorkdirs(api, keepS, busy, warn);
      if (gone.length) note(`deleted the unpacked code of ${gone.length} ended job(s): ${gone.join(', ')}`);
    } catch (err) {
      warn(`the node's unpacked code was not swept (${(err as Error).message}); trying again in ${everyMs / 1000} s`);
    }
  }
}
