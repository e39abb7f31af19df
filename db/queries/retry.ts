import { and, eq } from 'drizzle-orm';
import type { Tx } from '../client.ts';
import { jobAttempts, jobs, type AttemptConfig, type Job } from '../schema.ts';
import { transitionJob } from './jobs.ts';

export interface RetryPatch {
  command?: string[];
  workingDir?: string;
  gpus?: number;
  selector?: Record<string, string>;
  priority?: number;
  /** Merged into the previous attempt's env / params. */
  env?: Record<string, string>;
  params?: Record<string, unknown>;
}

export function applyPatch(prev: AttemptConfig, p: RetryPatch): AttemptConfig {
  return {
    command: p.command ?? prev.command,
    workingDir: p.workingDir ?? prev.workingDir,
    gpus: p.gpus ?? prev.gpus,
    selector: p.selector ?? prev.selector,
    priority: p.priority ?? prev.priority,
    env: { ...prev.env, ...p.env },
    params: { ...prev.params, ...p.params },
  };
}

export interface ConfigChange {
  key: string;
  from: unknown;
  to: unknown;
}

function flatten(c: AttemptConfig): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of Object.entries(c)) {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      for (const [kk, vv] of Object.entries(v as Record<string, unknown>)) out.set(`${k}.${kk}`, JSON.stringify(vv));
    } else out.set(k, JSON.stringify(v));
  }
  return out;
}

/** What changed from one attempt's config to the next, key by key (params.lr, gpus, env.X...). */
export function diffConfigs(a: AttemptConfig, b: AttemptConfig): ConfigChange[] {
  const fa = flatten(a);
  const fb = flatten(b);
  const keys = [...new Set([...fa.keys(), ...fb.keys()])].sort();
  const parse = (s: string | undefined) => (s === undefined ? null : (JSON.parse(s) as unknown));
  return keys.filter((k) => fa.get(k) !== fb.get(k)).map((k) => ({ key: k, from: parse(fa.get(k)), to: parse(fb.get(k)) }));
}

/**
 * Makes attempt N+1 of a job that ended FAILED, CANCELLED or LOST, with the patched config,
 * in CREATED. Returns null when the job is in another state (the caller answers 409).
 */
export async function createRetryAttempt(tx: Tx, job: Job, patch: RetryPatch): Promise<{ job: Job; changes: ConfigChange[] } | null> {
  if (!['FAILED', 'CANCELLED', 'LOST'].includes(job.state)) return null;
  const [prev] = await tx
    .select()
    .from(jobAttempts)
    .where(and(eq(jobAttempts.jobId, job.id), eq(jobAttempts.attempt, job.attempt)));
  const config = applyPatch(prev.config, patch);
  const changes = diffConfigs(prev.config, config);
  const next = job.attempt + 1;
  await tx
    .update(jobs)
    .set({
      attempt: next,
      command: config.command,
      workingDir: config.workingDir,
      gpus: config.gpus,
      selector: config.selector,
      priority: config.priority,
      env: config.env,
      params: config.params,
      lostCount: 0,
      nodeId: null,
      gpuIndices: null,
      exitCode: null,
      signal: null,
      reason: null,
      startedAt: null,
      endedAt: null,
    })
    .where(eq(jobs.id, job.id));
  await tx.insert(jobAttempts).values({ jobId: job.id, attempt: next, config, state: job.state });
  const detail = changes.length ? `retry: ${changes.map((c) => `${c.key} ${JSON.stringify(c.from)}→${JSON.stringify(c.to)}`).join(', ')}` : 'retry: same config';
  await transitionJob(tx, { jobId: job.id, attempt: next, from: ['FAILED', 'CANCELLED', 'LOST'], to: 'CREATED', detail });
  const [updated] = await tx.select().from(jobs).where(eq(jobs.id, job.id));
  return { job: updated, changes };
}
