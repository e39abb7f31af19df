import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createGpuHostActivities, ProcessTable } from '../../activities/gpu-host.ts';
import { CONTROL_TASK_QUEUE, gpuHostTaskQueue, nodeWorkflowId } from '../../workflows/names.ts';
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
  inventorySource: string;
  run: Promise<void>;
  shutdown(): Promise<void>;
}

/** The GPU-host worker: activities only, on the node's own task queue. */
export async function startAgent(o: AgentOptions): Promise<Agent> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(o.nodeId)) throw new Error(`node id "${o.nodeId}" must be 1-64 letters, digits, '.', '_' or '-'`);
  const { gpus, source } = await readInventory(o.nodeId, o.fakeGpus);
  const inventory: NodeInventory = { nodeId: o.nodeId, labels: o.labels, hostname: os.hostname(), gpus };
  const processes = new ProcessTable(o.killGraceMs);
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
    }),
    maxConcurrentActivityTaskExecutions: 1000,
    shutdownGraceTime: '5s',
  });
  const run = worker.run();
  const args: [NodeWorkflowInput] = [{ nodeId: o.nodeId, heartbeatTimeoutMs: o.heartbeatTimeoutMs }];
  await o.client.workflow.signalWithStart('nodeWorkflow', {
    workflowId: nodeWorkflowId(o.nodeId),
    taskQueue: CONTROL_TASK_QUEUE,
    args,
    signal: nodeOnlineSignal,
    signalArgs: [inventory],
  });
  return {
    inventory,
    inventorySource: source,
    run,
    async shutdown() {
      await processes.stopAll();
      worker.shutdown();
      await run;
    },
  };
}
