/** Client calls for forks and lineage, over the same request() as the rest of the CLI. */
import { randomUUID } from 'node:crypto';
import type { GpuplaneClient } from './client.ts';
import type { ForkBody, ForkedJobJson, LineageJson } from './api-types.ts';

/** Forks a checkpoint under a fresh Idempotency-Key (or the one given): the same key answers the same job. */
export function forkCheckpoint(c: GpuplaneClient, checkpointId: string, body: ForkBody, idempotencyKey: string = randomUUID()): Promise<ForkedJobJson> {
  return c.request('POST', `/checkpoints/${encodeURIComponent(checkpointId)}/fork`, body, { 'idempotency-key': idempotencyKey });
}

/** The lineage tree of a run or a checkpoint. */
export function lineage(c: GpuplaneClient, of: { run: string } | { checkpoint: string }): Promise<LineageJson> {
  return c.request('GET', `/lineage?${new URLSearchParams(of)}`);
}
