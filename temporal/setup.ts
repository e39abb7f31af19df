import { Connection, type Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { Client as TemporalClient } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type LogEntry } from '@temporalio/worker';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';

const KEYWORD = 2; // temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

/** Registers the namespace (if missing) and our search attributes on it. Idempotent. */
export async function ensureNamespace(address: string, namespace: string): Promise<void> {
  const conn = await Connection.connect({ address });
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

export async function connectClient(address: string, namespace: string): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address });
  const client = new TemporalClient({ connection, namespace });
  return { client, close: () => connection.close() };
}

export async function connectWorker(address: string): Promise<NativeConnection> {
  installTemporalRuntime((process.env.GPUPLANE_TEMPORAL_LOG_LEVEL as 'WARN' | undefined) ?? 'WARN');
  return NativeConnection.connect({ address });
}

let runtimeInstalled = false;
/**
 * Installs the Temporal worker runtime once per process: warnings and errors only, and no
 * signal handlers of its own, so our shutdown stops the agent, API and workers in order.
 */
export function installTemporalRuntime(level: 'WARN' | 'INFO' | 'DEBUG' = 'WARN'): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  // An agent's worker has no workflows by design; the SDK's warning about that is noise.
  const logger = new DefaultLogger(level, (entry) => {
    if (entry.message.startsWith('No workflows registered')) return;
    // An attempt or lease ended by its own agent's shutdown is expected, not a warning.
    if ((entry.meta?.error as { type?: string } | undefined)?.type === 'AgentShutdown') return;
    defaultLog(entry);
  });
  const defaultLog = (entry: LogEntry) => {
    const meta = entry.meta && Object.keys(entry.meta).length ? entry.meta : '';
    process.stderr.write(`${new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString()} [${entry.level}] ${entry.message} ${meta ? JSON.stringify(meta) : ''}\n`);
  };
  Runtime.install({ logger, shutdownSignals: [] });
}
