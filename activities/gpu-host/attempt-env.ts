import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gangEnv, hostfileText, type GangSpec } from '../../domain/gang-env.ts';
import { baseJobEnv } from '../../domain/job-env.ts';
import { runToken } from '../../runtime/tokens.ts';
import type { AttemptGang, AttemptSpec } from '../../workflows/types.ts';
import type { GpuHostDeps } from './deps.ts';

/** The environment an attempt's process starts with: the documented base, the job's own, its secrets, and GPUPlane's. */
export function attemptEnv(deps: Pick<GpuHostDeps, 'passEnv' | 'apiUrl' | 'nodeId' | 'nodeToken'>, spec: AttemptSpec, secrets: Record<string, string> = {}, hostfile?: string): NodeJS.ProcessEnv {
  return {
    ...baseJobEnv(process.env, deps.passEnv),
    ...spec.env,
    ...secrets,
    // nvidia-smi numbers cards in PCI bus order; CUDA numbers them fastest-first unless told.
    CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
    CUDA_VISIBLE_DEVICES: spec.gpuIndices.join(','),
    GPUPLANE_JOB_ID: spec.jobId,
    GPUPLANE_ATTEMPT: String(spec.attempt),
    GPUPLANE_API_URL: deps.apiUrl,
    GPUPLANE_NODE_ID: deps.nodeId,
    GPUPLANE_PARAMS: JSON.stringify(spec.params ?? {}),
    ...(spec.runId ? { GPUPLANE_RUN_ID: spec.runId } : {}),
    // What to load: the latest checkpoint of an earlier attempt, or the job's resume_from.
    ...(spec.resumeFrom ? { GPUPLANE_RESUME_FROM: spec.resumeFrom.uri, GPUPLANE_RESUME_FROM_ID: spec.resumeFrom.id } : {}),
    // The job's own credential, good for its run only: never the node's token itself.
    ...(spec.runId && deps.nodeToken ? { GPUPLANE_TOKEN: runToken(deps.nodeToken, spec.runId, spec.attempt) } : {}),
    ...mlflowEnv(deps, spec),
    // A gang member: where the others are (torchrun's PET_*, MASTER_*, NODE_RANK, the hostfile).
    ...(spec.gang ? gangEnv(gangSpecOf(spec.gang), spec.gang.rank, hostfile ?? '') : {}),
  };
}

/**
 * An unchanged MLflow script logs into the attempt's own run (docs/mlflow.md): the tracking URI of
 * GPUPlane's MLflow endpoints, the run token, the run and its experiment. A job that sets
 * MLFLOW_TRACKING_URI itself keeps its own MLflow server, and gets none of these.
 */
function mlflowEnv(deps: Pick<GpuHostDeps, 'apiUrl' | 'nodeToken'>, spec: AttemptSpec): Record<string, string> {
  if (!spec.runId || spec.env.MLFLOW_TRACKING_URI !== undefined) return {};
  return {
    MLFLOW_TRACKING_URI: `${deps.apiUrl.replace(/\/+$/, '')}/mlflow`,
    MLFLOW_RUN_ID: spec.runId,
    ...(spec.mlflowExperiment ? { MLFLOW_EXPERIMENT_NAME: spec.mlflowExperiment } : {}),
    ...(deps.nodeToken ? { MLFLOW_TRACKING_TOKEN: runToken(deps.nodeToken, spec.runId, spec.attempt) } : {}),
  };
}

/** What domain/gang-env.ts needs of an attempt's gang. */
export function gangSpecOf(g: AttemptGang): GangSpec {
  return { masterPort: g.masterPort, members: g.members.map((m) => ({ address: m.address, gpus: m.gpuIndices.length })) };
}

/**
 * Writes a gang member's hostfile (one `host slots=G` line per member) where the job's user can
 * read it: addresses and slot counts only, nothing secret. The agent's data dir is its own
 * (0700), so the file goes into a folder of the agent's under the system's temp dir, made with
 * mkdtemp (a name nobody can claim first) and 0755: no job user can write into it or plant a link
 * there. Returns the file's path.
 */
export function writeHostfile(spec: AttemptSpec & { gang: AttemptGang }): string {
  const file = path.join(hostfileDir(), `${spec.jobId}.${spec.attempt}.${spec.gang.rank}.hostfile`);
  fs.rmSync(file, { force: true });
  fs.writeFileSync(file, hostfileText(gangSpecOf(spec.gang).members), { mode: 0o644, flag: 'wx' });
  return file;
}

let hostfiles: string | null = null;

/** The agent's hostfile folder, made anew when the temp dir's cleaner took it (or it is not ours any more). */
function hostfileDir(): string {
  const st = hostfiles ? fs.lstatSync(hostfiles, { throwIfNoEntry: false }) : undefined;
  const ours = st && st.isDirectory() && st.uid === process.getuid?.() && (st.mode & 0o022) === 0;
  if (!ours) {
    hostfiles = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-hostfiles-'));
    fs.chmodSync(hostfiles, 0o755);
  }
  return hostfiles!;
}
