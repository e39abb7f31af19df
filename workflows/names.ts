/** Task queue and workflow id conventions (docs/architecture.md, "Temporal layout"). */
export const CONTROL_TASK_QUEUE = 'gpuplane-control';
export const SCHEDULER_WORKFLOW_ID = 'scheduler';
export const gpuHostTaskQueue = (nodeId: string): string => `gpu-host.${nodeId}`;
export const jobWorkflowId = (jobId: string): string => `job/${jobId}`;
export const nodeWorkflowId = (nodeId: string): string => `node/${nodeId}`;
export const webhookWorkflowId = (webhookId: string): string => `webhook/${webhookId}`;
export const sweepWorkflowId = (sweepId: string): string => `sweep/${sweepId}`;
