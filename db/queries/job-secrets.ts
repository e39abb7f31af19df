/** The values of a job's secret variables: written at submit, read only by the launch route. */
import { eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { jobSecrets } from '../schema.ts';

/** insertJobSecrets stores the values of a job's secret variables (none: nothing is written). */
export async function insertJobSecrets(ex: Executor, jobId: string, secrets: Record<string, string>): Promise<void> {
  if (Object.keys(secrets).length === 0) return;
  await ex.insert(jobSecrets).values(Object.entries(secrets).map(([name, value]) => ({ jobId, name, value })));
}

/** jobSecretValues returns a job's secret variables as name → value. */
export async function jobSecretValues(ex: Executor, jobId: string): Promise<Record<string, string>> {
  const rows = await ex.select({ name: jobSecrets.name, value: jobSecrets.value }).from(jobSecrets).where(eq(jobSecrets.jobId, jobId));
  return Object.fromEntries(rows.map((r) => [r.name, r.value]));
}
