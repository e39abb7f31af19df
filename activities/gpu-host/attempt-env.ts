import { baseJobEnv } from '../../domain/job-env.ts';
import { runToken } from '../../runtime/tokens.ts';
import type { AttemptSpec } from '../../workflows/types.ts';
import type { GpuHostDeps } from './deps.ts';

/** The environment an attempt's process starts with: the documented base, the job's own, its secrets, and GPUPlane's. */
export function attemptEnv(deps: Pick<GpuHostDeps, 'passEnv' | 'apiUrl' | 'nodeId' | 'nodeToken'>, spec: AttemptSpec, secrets: Record<string, string> = {}): NodeJS.ProcessEnv {
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
    // The job's own credential, good for its run only: never the node's token itself.
    ...(spec.runId && deps.nodeToken ? { GPUPLANE_TOKEN: runToken(deps.nodeToken, spec.runId, spec.attempt) } : {}),
  };
}
