/** The calls a Run makes about itself, besides sending its batches: set it up, and finish it. */
import { ApiError, request, type ApiTarget } from './http.ts';

/**
 * Registers the run (under an Idempotency-Key fixed for the run, so a retry finds the first) or
 * patches the attached one; returns its id. Errors are the caller's to judge.
 */
export async function setupRun(api: ApiTarget, o: { runId: string | null; create: string | null; patch: string | null; key: string }, timeoutMs: number): Promise<string | null> {
  if (o.create) return ((await request(api, 'POST', '/runs', o.create, { 'idempotency-key': o.key }, timeoutMs)) as { id: string }).id;
  if (o.patch) await request(api, 'PATCH', `/runs/${o.runId}`, o.patch, {}, timeoutMs);
  return o.runId;
}

/** Ends the run, retrying (200 ms, doubling to 2 s) within budgetMs; returns the warning to give when it could not. */
export async function finishRun(api: ApiTarget, runId: string, status: string, budgetMs: number, timeoutMs: number): Promise<string | null> {
  const deadline = Date.now() + budgetMs;
  let delay = 200;
  for (;;) {
    try {
      await request(api, 'POST', `/runs/${runId}/finish`, JSON.stringify({ status }), {}, Math.min(timeoutMs, budgetMs));
      return null;
    } catch (err) {
      if (err instanceof ApiError && !err.retryable) return `gpuplane: could not finish run ${runId}: ${err.message}`;
      if (Date.now() + delay > deadline) return `gpuplane: could not finish run ${runId} (${(err as Error).message}); the server marks it crashed when its heartbeats stop`;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 2000);
  }
}
