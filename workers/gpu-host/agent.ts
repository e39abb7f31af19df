import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createGpuHostActivities, ProcessTable } from '../../activities/gpu-host.ts';
import { reattachSignal } from '../../workflows/job-workflow.ts';
import { CONTROL_TASK_QUEUE, gpuHostTaskQueue, jobWorkflowId, nodeWorkflowId } from '../../workflows/names.ts';
import { nodeOnlineSignal, type NodeWorkflowInput } from '../../workflows/node-workflow.ts';
import type { NodeInventory } from '../../workflows/types.ts';
import { readInventory } from './inventory.ts';

export interface AgentOptions {
  nodeId: string;
  labels: Record<string, string>;
  fakeGpus?: number;
  client: Client;
  connection: NativeConnection;
  namespace: string;
  apiUrl: string;
  dataDir: string;
  heartbeatTimeoutMs: number;
  killGraceMs: number;
}

export interface Agent {
  inventory: NodeInventory;
  /** Attempts of a previous run of this agent that it re-attached to. */
  adopted: number;
  /** Attempts running now. */
  running(): number;
  inventorySource: string;
  run: Promise<void>;
  shutdown(): Promise<void>;
}

/** The GPU-host worker: activities only, on the node's own task queue. */
export async function startAgent(o: AgentOptions): Promise<Agent> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(o.nodeId)) throw new Error(`node id "${o.nodeId}" must be 1-64 letters, digits, '.', '_' or '-'`);
  const { gpus, source } = await readInventory(o.nodeId, o.fakeGpus);
  const inventory: NodeInventory = { nodeId: o.nodeId, labels: o.labels, hostname: os.hostname(), gpus };
  // Fencing must finish before the server counts an attempt LOST (one heartbeat timeout T):
  // the watchdog and the shim start fencing at 0.4 T and allow SIGTERM at most 0.4 T - 1 s
  // more, so the process is gone by 0.8 T plus a probe interval.
  const fenceGraceMs = Math.max(500, Math.min(o.killGraceMs, o.heartbeatTimeoutMs * 0.4 - 1000));
  const processes = new ProcessTable(o.killGraceMs, path.join(o.dataDir, 'run'), fenceGraceMs);
  const worker = await Worker.create({
    connection: o.connection,
    namespace: o.namespace,
    taskQueue: gpuHostTaskQueue(o.nodeId),
    activities: createGpuHostActivities({
      nodeId: o.nodeId,
      processes,
      client: o.client,
      inventory: () => inventory,
      logDir: path.join(o.dataDir, 'logs'),
      apiUrl: o.apiUrl,
      // Within half the heartbeat timeout, so an unadopted attempt is dead before the server
      // could count it LOST and start it elsewhere.
      adoptWindowS: Math.max(1, Math.floor((o.heartbeatTimeoutMs * 0.4) / 1000)),
    }),
    maxConcurrentActivityTaskExecutions: 1000,
    // Heartbeats go out at least every second, so the server's view of this node is never
    // much older than the agent's own view of its connection (see the fencing watchdog).
    maxHeartbeatThrottleInterval: '1s',
    defaultHeartbeatThrottleInterval: '1s',
    shutdownGraceTime: '5s',
  });
  // If the worker itself dies, nothing reports for its attempts any more: stop them, so the
  // agent never lingers with processes that the server will count LOST and start elsewhere.
  const run = worker.run().catch(async (err: unknown) => {
    await processes.stopAll();
    throw err;
  });
  // Attempts of this agent's previous life that still run: adopt them, and tell their jobs.
  const adopted = processes.adoptSurvivors(o.heartbeatTimeoutMs * 0.4);
  for (const rec of adopted) {
    await o.client.workflow
      .getHandle(jobWorkflowId(rec.spec.jobId))
      .signal(reattachSignal, { attempt: rec.spec.attempt, pid: rec.pid, logPath: rec.logPath })
      .catch(() => undefined);
  }
  const args: [NodeWorkflowInput] = [{ nodeId: o.nodeId, heartbeatTimeoutMs: o.heartbeatTimeoutMs }];
  await o.client.workflow.signalWithStart('nodeWorkflow', {
    workflowId: nodeWorkflowId(o.nodeId),
    taskQueue: CONTROL_TASK_QUEUE,
    args,
    signal: nodeOnlineSignal,
    signalArgs: [inventory],
  });
  const watchdog = startFencingWatchdog(o.client, processes, o.heartbeatTimeoutMs);
  return {
    inventory,
    adopted: adopted.length,
    running: () => processes.live.size,
    inventorySource: source,
    run,
    async shutdown() {
      watchdog.stop();
      await processes.stopAll();
      worker.shutdown();
      await run;
    },
  };
}

/**
 * Self-fencing: when the agent has not reached the Temporal server for half the heartbeat
 * timeout, the server may soon count its attempts LOST and start them on another node; the
 * agent kills them first, so one job never runs in two places at once (a network partition
 * must not produce a zombie twin).
 */
export function startFencingWatchdog(client: Client, processes: ProcessTable, heartbeatTimeoutMs: number): { stop(): void } {
  const fenceAfterMs = heartbeatTimeoutMs * 0.4;
  const probeEveryMs = Math.max(250, Math.min(1000, heartbeatTimeoutMs / 10));
  let lastContact = Date.now();
  let fenced = false;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    client.connection
      .withDeadline(Date.now() + probeEveryMs, () => client.connection.workflowService.getSystemInfo({}))
      .then(
        () => {
          lastContact = Date.now();
          fenced = false;
        },
        () => undefined,
      )
      .finally(() => {
        busy = false;
        if (!fenced && Date.now() - lastContact > fenceAfterMs && processes.live.size > 0) {
          fenced = true;
          void processes.fenceAll();
        }
      });
  }, probeEveryMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
