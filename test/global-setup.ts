import type { TestProject } from 'vitest/node';
import { startSharedServices, type RunningServices } from './support/services.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgPort: number;
    temporalAddress: string;
    workflowBundle: string;
  }
}

let services: RunningServices | undefined;

/** One real PostgreSQL cluster and one real Temporal dev server for the whole run. */
export async function setup(project: TestProject): Promise<void> {
  services = await startSharedServices('test');
  project.provide('pgPort', services.pgPort);
  project.provide('temporalAddress', services.temporalAddress);
  project.provide('workflowBundle', services.workflowBundle);
}

export async function teardown(): Promise<void> {
  await services?.stop();
}
