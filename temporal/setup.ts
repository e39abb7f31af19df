import { Connection, type Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { Client as TemporalClient } from '@temporalio/client';
import type { Logger } from 'pino';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import { temporalSecurityFromEnv, type TemporalSecurity } from './security.ts';

const KEYWORD = 2; // temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

/** Registers the namespace (if missing) and our search attributes on it. Idempotent. */
export async function ensureNamespace(address: string, namespace: string, security: TemporalSecurity = temporalSecurityFromEnv()): Promise<void> {
  const conn = await Connection.connect({ address, ...security });
  try {
    try {
      await conn.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('7 days') });
    } catch (err) {
      if (!/already exists|AlreadyExists/i.test(String(err))) throw err;
    }
    const have = await conn.operatorService.listSearchAttributes({ namespace });
    const missing = SEARCH_ATTRIBUTES.filter((sa) => !(sa.name in (have.customAttributes ?? {})));
    if (missing.length > 0) {
      await conn.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((sa) => [sa.name, KEYWORD])),
      });
    }
  } finally {
    await conn.close();
  }
}

export async function connectClient(address: string, namespace: string, security: TemporalSecurity = temporalSecurityFromEnv()): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address, ...security });
  const client = new TemporalClient({ connection, namespace });
  return { client, close: () => connection.close() };
}

/**
 * Retries `fn` until it succeeds: a process started while Temporal is down (restarting, paused,
 * or not up yet) waits for it instead of exiting. Backs off to 5 s; says so once a wait begins.
 */
export async function untilTemporalAnswers<T>(what: string, fn: () => Promise<T>, logger: Logger): Promise<T> {
  for (let delay = 250, tries = 0; ; delay = Math.min(delay * 2, 5000), tries++) {
    try {
      return await fn();
    } catch (err) {
      if (tries === 0 || tries % 10 === 0) logger.warn({ err: (err as Error).message }, `${what}: Temporal does not answer yet; retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** The namespace data key a plane claims its namespace with (`temporal operator namespace describe` shows it). */
export const PLANE_KEY = 'gpuplane.plane';

/**
 * Claims `namespace` for the plane `planeId` (its database's id, db/queries/plane.ts), or refuses
 * in one line when another plane holds it: two planes on one namespace would share one
 * scheduler and one set of task queues, each with its own database, and take each other's work.
 * A namespace no plane claimed yet is claimed now (and read back, so that of two planes
 * starting at once only one goes on).
 */
export async function claimNamespace(client: Client, namespace: string, planeId: string, where: string): Promise<void> {
  const owner = async () => (await client.connection.workflowService.describeNamespace({ namespace })).namespaceInfo?.data?.[PLANE_KEY] ?? null;
  let held = await owner();
  if (held === null) {
    await client.connection.workflowService.updateNamespace({ namespace, updateInfo: { data: { [PLANE_KEY]: planeId } } });
    held = await owner();
  }
  if (held !== planeId) {
    throw new Error(`the Temporal namespace "${namespace}" at ${where} belongs to another GPUPlane (plane ${held}; this database is plane ${planeId}): give this plane a namespace of its own (TEMPORAL_NAMESPACE) or a Temporal server of its own (gpuctl up --temporal-port P)`);
  }
}
