/**
 * GPUPlane's rows as MLflow's messages (mlflow/protos/service.proto, in the JSON its REST store
 * reads), and MLflow's names for ours:
 *
 * - Experiment names: domain/mlflow-names.ts (`project/experiment`).
 * - Run statuses: running RUNNING, finished FINISHED, failed and crashed FAILED, cancelled KILLED.
 * - Tags named `mlflow.*` are kept apart from the user's (runs.system_tags); `mlflow.runName` is
 *   the run's name; a run of a job carries `gpuplane.job_id`, `gpuplane.attempt`, `gpuplane.node`.
 */
import type { ExperimentRow } from '../../db/queries/mlflow.ts';
import type { RunWithNames } from '../../db/queries/runs.ts';
import type { RunInput } from '../../db/schema/mlflow-models.ts';
import { encodeValue } from '../../domain/metrics.ts';
import type { RunStatus } from '../../domain/run-status.ts';
import { DEFAULT_EXPERIMENT_ID, mlflowExperimentId, mlflowName } from '../../domain/mlflow-names.ts';

export { DEFAULT_EXPERIMENT_ID, DEFAULT_EXPERIMENT_NAME, DEFAULT_PROJECT, isDefaultExperiment, mlflowExperimentId, mlflowName, namesOf } from '../../domain/mlflow-names.ts';

export const MLFLOW_STATUS: Record<RunStatus, string> = { running: 'RUNNING', finished: 'FINISHED', failed: 'FAILED', crashed: 'FAILED', cancelled: 'KILLED' };
/** How an MLflow status a script sets reads as ours (SCHEDULED is still running). */
export const STATUS_FROM_MLFLOW: Record<string, RunStatus> = { RUNNING: 'running', SCHEDULED: 'running', FINISHED: 'finished', FAILED: 'failed', KILLED: 'cancelled' };

const ms = (d: Date | null) => (d ? d.getTime() : null);

/** A run's artifact root; a run in no experiment (a job's run with a project alone) is under "0", as the console reads it (web/src/artifacts.ts). */
export const artifactUri = (experimentId: string, runId: string) => `mlflow-artifacts:/${experimentId || DEFAULT_EXPERIMENT_ID}/${runId}/artifacts`;

export function experimentJson(e: ExperimentRow) {
  const id = mlflowExperimentId(e.id, e.projectName, e.name);
  return {
    experiment_id: id,
    name: mlflowName(e.projectName, e.name),
    artifact_location: `mlflow-artifacts:/${id}`,
    lifecycle_stage: e.deletedAt ? 'deleted' : 'active',
    creation_time: e.createdAt.getTime(),
    last_update_time: (e.deletedAt ?? e.createdAt).getTime(),
    tags: Object.entries(e.tags).map(([key, value]) => ({ key, value })),
  };
}

/** A param's value as MLflow's string (params our SDK logged may be numbers or objects). */
export const paramText = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

export interface RunExtras {
  metrics: { key: string; value: number; step: number; timestamp: number }[];
  node: string | null;
  /** Its datasets and models in and models out (log-inputs, log-outputs), in the order logged. */
  io?: readonly RunInput[];
}

/** A run's inputs and outputs as MLflow's RunInputs and RunOutputs. */
function ioJson(io: readonly RunInput[]) {
  const pairs = (o: Record<string, string>) => Object.entries(o).map(([key, value]) => ({ key, value }));
  return {
    inputs: {
      dataset_inputs: io.filter((x) => x.kind === 'dataset').map((x) => ({ tags: pairs(x.tags), dataset: x.dataset ?? {} })),
      model_inputs: io.filter((x) => x.kind === 'model_input').map((x) => ({ model_id: x.modelId })),
    },
    outputs: { model_outputs: io.filter((x) => x.kind === 'model_output').map((x) => ({ model_id: x.modelId, step: x.step ?? 0 })) },
  };
}

export function runInfoJson(r: RunWithNames & { deletedAt?: Date | null }) {
  const experimentId = mlflowExperimentId(r.experimentId, r.projectName, r.experimentName);
  return {
    run_id: r.id,
    run_uuid: r.id,
    run_name: r.name ?? '',
    experiment_id: experimentId,
    user_id: r.systemTags['mlflow.user'] ?? '',
    status: MLFLOW_STATUS[r.status],
    start_time: r.startedAt.getTime(),
    ...(r.endedAt ? { end_time: ms(r.endedAt) } : {}),
    artifact_uri: artifactUri(experimentId, r.id),
    lifecycle_stage: r.deletedAt ? 'deleted' : 'active',
  };
}

export function runJson(r: RunWithNames & { deletedAt?: Date | null }, x: RunExtras) {
  const tags: Record<string, string> = { ...r.tags, ...r.systemTags };
  if (r.name) tags['mlflow.runName'] = r.name;
  if (r.jobId) {
    tags['gpuplane.job_id'] = r.jobId;
    tags['gpuplane.attempt'] = String(r.attempt ?? '');
    if (x.node) tags['gpuplane.node'] = x.node;
  }
  tags['gpuplane.source'] = r.source;
  return {
    info: runInfoJson(r),
    data: {
      metrics: x.metrics.map((m) => ({ key: m.key, value: encodeValue(m.value), timestamp: m.timestamp, step: m.step })),
      params: Object.entries(r.params).map(([key, value]) => ({ key, value: paramText(value) })),
      tags: Object.entries(tags).map(([key, value]) => ({ key, value })),
    },
    ...ioJson(x.io ?? []),
  };
}

/** A page token: the offset of the next page, opaque to the client. */
export const pageToken = (offset: number) => Buffer.from(JSON.stringify({ offset })).toString('base64url');
export function offsetOf(token: unknown): number | null {
  if (token === undefined || token === null || token === '') return 0;
  if (typeof token !== 'string') return null;
  try {
    const o = JSON.parse(Buffer.from(token, 'base64url').toString()) as { offset?: unknown };
    return Number.isSafeInteger(o.offset) && (o.offset as number) >= 0 ? (o.offset as number) : null;
  } catch {
    return null;
  }
}
