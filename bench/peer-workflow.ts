import { proxyActivities } from '@temporalio/workflow';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '1 minute' });

/** The bare-Temporal peer of bench/dispatch: one activity, nothing else. */
export async function peerWorkflow(): Promise<void> {
  await noop();
}
