export { jobWorkflow } from './job-workflow.ts';
export { schedulerWorkflow } from './scheduler-workflow.ts';
export { nodeWorkflow } from './node-workflow.ts';
export { settleJobWorkflow } from './settle-workflow.ts';
export { webhookWorkflow } from './webhook-workflow.ts';
export { sweepWorkflow } from './sweep-workflow.ts';
