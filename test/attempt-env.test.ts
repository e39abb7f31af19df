import { describe, expect, it } from 'vitest';
import { attemptEnv } from '../activities/gpu-host/attempt-env.ts';
import { memberSpec } from '../workflows/job/gang.ts';
import { newId } from '../db/ids.ts';
import { newToken } from '../runtime/tokens.ts';
import type { AttemptSpec } from '../workflows/types.ts';

const deps = { passEnv: [], apiUrl: 'http://api', nodeId: 'n1' };
const spec: AttemptSpec = { jobId: 'job-1', attempt: 2, type: 'TRAIN', runId: 'run-1', nodeId: 'n1', command: ['true'], workingDir: '/w', env: {}, params: {}, gpuIndices: [0], lostAfterMs: 60_000 };
const resumeFrom = { id: 'ckpt-7', uri: '/w/ckpts/step_70.pt' };

describe("an attempt's environment", () => {
  it('names the checkpoint to resume from (path and id) when the attempt has one, and nothing when not', () => {
    expect(attemptEnv(deps, { ...spec, resumeFrom })).toMatchObject({ GPUPLANE_RESUME_FROM: resumeFrom.uri, GPUPLANE_RESUME_FROM_ID: resumeFrom.id });
    const none = attemptEnv(deps, spec);
    expect(none.GPUPLANE_RESUME_FROM).toBeUndefined();
    expect(none.GPUPLANE_RESUME_FROM_ID).toBeUndefined();
  });

  it('gives every gang member the same one', () => {
    const gang = { rank: 0, masterPort: 29500, members: [{ nodeId: 'n1', address: 'h1', gpuIndices: [0] }, { nodeId: 'n2', address: 'h2', gpuIndices: [1] }] };
    for (const rank of [0, 1]) {
      const member = memberSpec({ ...spec, resumeFrom, gang }, rank);
      expect(member.nodeId).toBe(gang.members[rank].nodeId);
      const env = attemptEnv({ ...deps, nodeId: member.nodeId }, member, {}, '/tmp/hostfile');
      expect(env).toMatchObject({ GPUPLANE_RESUME_FROM: resumeFrom.uri, GPUPLANE_RESUME_FROM_ID: resumeFrom.id, NODE_RANK: String(rank) });
    }
  });

  it("points an unchanged MLflow script at the attempt's run, unless the job names an MLflow server of its own", () => {
    const runId = newId('run');
    const env = attemptEnv({ ...deps, apiUrl: 'http://api:8787/', nodeToken: newToken() }, { ...spec, runId, mlflowExperiment: 'proj/exp' });
    expect(env).toMatchObject({ MLFLOW_TRACKING_URI: 'http://api:8787/mlflow', MLFLOW_RUN_ID: runId, MLFLOW_EXPERIMENT_NAME: 'proj/exp' });
    expect(env.MLFLOW_TRACKING_TOKEN).toBe(env.GPUPLANE_TOKEN);
    const own = attemptEnv(deps, { ...spec, env: { MLFLOW_TRACKING_URI: 'http://their-mlflow:5000' } });
    expect(own.MLFLOW_TRACKING_URI).toBe('http://their-mlflow:5000');
    expect(own.MLFLOW_RUN_ID).toBeUndefined();
    expect(attemptEnv(deps, { ...spec, runId: null }).MLFLOW_TRACKING_URI).toBeUndefined();
  });
});
