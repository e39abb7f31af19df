/** Client calls for evaluations, over the same request() as the rest of the CLI. */
import type { GpuplaneClient } from './client.ts';
import type { EvaluationJson, StartEvaluationBody } from './api-types.ts';

/** The statuses in which an evaluation has ended. */
export const EVALUATION_ENDED: readonly string[] = ['succeeded', 'failed', 'cancelled'];

const enc = encodeURIComponent;

export function startEvaluation(c: GpuplaneClient, checkpointId: string, req: StartEvaluationBody = {}): Promise<EvaluationJson> {
  return c.request('POST', `/checkpoints/${enc(checkpointId)}/evaluations`, req);
}

export function getEvaluation(c: GpuplaneClient, id: string): Promise<EvaluationJson> {
  return c.request('GET', `/evaluations/${enc(id)}`);
}

export async function listEvaluations(c: GpuplaneClient, checkpointId: string): Promise<EvaluationJson[]> {
  return (await c.request<{ evaluations: EvaluationJson[] }>('GET', `/checkpoints/${enc(checkpointId)}/evaluations`)).evaluations;
}

/** Polls until the evaluation has ended (succeeded, failed or cancelled) or the deadline passes. */
export async function waitForEvaluation(c: GpuplaneClient, id: string, timeoutMs = 3_600_000, intervalMs = 500): Promise<EvaluationJson> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const e = await getEvaluation(c, id);
    if (EVALUATION_ENDED.includes(e.status)) return e;
    if (Date.now() > deadline) throw new Error(`evaluation ${id} is still ${e.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
