/**
 * Project quotas (gpuctl quota set|list) and what the fair-share order (domain/fair-share.ts)
 * reads of the database once per scheduling pass: the quotas, the cards each job holds, and each
 * project's decayed usage.
 */
import { and, eq, sql } from 'drizzle-orm';
import { queryRows, type Executor } from '../client.ts';
import { projectQuotas, projects } from '../schema.ts';
import { cardsInUse, cardsOf, fairShareFactor, quotaFor, type CardHolder, type FairShareState, type ProjectQuota } from '../../domain/fair-share.ts';
import type { QueuedJob } from '../../domain/placement.ts';
import { ensureProject, findProjectId } from './projects.ts';

/** setQuota sets a project's quota, over the whole cluster (pool null) or in a pool, creating the project on first use; returns the project's id. */
export async function setQuota(ex: Executor, project: string, pool: string | null, gpus: number, by: string): Promise<string> {
  const projectId = await ensureProject(ex, project);
  await ex
    .insert(projectQuotas)
    .values({ projectId, pool: pool ?? '', gpus, setBy: by })
    .onConflictDoUpdate({ target: [projectQuotas.projectId, projectQuotas.pool], set: { gpus, setBy: by, setAt: sql`now()` } });
  return projectId;
}

/** clearQuota removes a project's quota (whole cluster, or the pool's); returns whether there was one. */
export async function clearQuota(ex: Executor, project: string, pool: string | null): Promise<boolean> {
  const projectId = await findProjectId(ex, project);
  if (projectId === undefined) return false;
  const gone = await ex
    .delete(projectQuotas)
    .where(and(eq(projectQuotas.projectId, projectId), eq(projectQuotas.pool, pool ?? '')))
    .returning({ pool: projectQuotas.pool });
  return gone.length > 0;
}

/** projectQuotaList returns every quota, as the fair-share order takes them. */
export async function projectQuotaList(ex: Executor): Promise<ProjectQuota[]> {
  const rows = await ex.select({ projectId: projectQuotas.projectId, pool: projectQuotas.pool, gpus: projectQuotas.gpus }).from(projectQuotas);
  return rows.map((r) => ({ projectId: r.projectId, pool: r.pool === '' ? null : r.pool, gpus: r.gpus }));
}

/**
 * cardHolders returns the cards held now, by the project and selector of the jobs that hold them: one line for all the
 * jobs of a project with one selector (what counts against a quota depends on nothing else), not
 * a line a job, so a pass over thousands of running jobs reads a few dozen lines. The cards a
 * DISPATCHING or RUNNING job holds are its size (cards a node × nodes), which its placement
 * claimed in full; counted from the jobs, not their cards, it reads one table, not two.
 */
export async function cardHolders(ex: Executor): Promise<CardHolder[]> {
  const rows = await queryRows<{ project_id: string | null; selector: Record<string, string>; cards: number | string }>(
    ex,
    sql`select j.project_id, j.selector, sum(j.gpus * j.nodes) as cards from jobs j where j.state in ('DISPATCHING', 'RUNNING') and j.gpus > 0 group by j.project_id, j.selector`,
  );
  return rows.map((r) => ({ projectId: r.project_id, selector: r.selector, cards: Number(r.cards) }));
}

/**
 * decayedUsage returns each project's card-seconds (its jobs' cards × the time their attempts ran, an attempt still
 * running up to `now`), each second weighed by 2^(-age / half-life): domain/fair-share.ts
 * decayedCardSeconds, in SQL. By project id, '' for jobs of no project. Attempts that ended more
 * than 20 half-lives ago weigh under a millionth and are not read.
 */
export async function decayedUsage(ex: Executor, now: Date, halfLifeMs: number): Promise<Map<string, number>> {
  const lambda = Math.LN2 / (halfLifeMs / 1000);
  const rows = await queryRows<{ project: string; usage: number | string }>(
    ex,
    sql`with spans as (
          select coalesce(j.project_id, '') as project, j.gpus * j.nodes as cards,
                 greatest(extract(epoch from (${now}::timestamptz - coalesce(a.ended_at, ${now}::timestamptz))), 0)::float8 as since_end,
                 greatest(extract(epoch from (coalesce(a.ended_at, ${now}::timestamptz) - a.started_at)), 0)::float8 as length
          from job_attempts a join jobs j on j.id = a.job_id
          where a.started_at is not null and (a.ended_at is null or a.ended_at > ${now}::timestamptz - make_interval(secs => ${(20 * halfLifeMs) / 1000})))
        select project, sum(cards * exp(-${lambda}::float8 * since_end) * (1 - exp(-${lambda}::float8 * length)) / ${lambda}::float8) as usage
        from spans group by project`,
  );
  return new Map(rows.map((r) => [r.project, Number(r.usage)]));
}

/**
 * Decayed usage (decayedUsage) read from the database at most every `maxAgeMs`: in between, the
 * last read decays by 2^(-Δt / half-life), which is exact for the attempts that had ended and
 * leaves out only the card-seconds running attempts added since (at most `maxAgeMs` of them, little
 * beside a half-life of hours). One per process that plans passes: reading 100,000 attempts costs
 * 165 ms on PostgreSQL, too much for every pass.
 */
export class UsageCache {
  private last: { at: number; halfLifeMs: number; usage: Map<string, number> } | null = null;
  constructor(private readonly maxAgeMs = 30_000) {}

  async get(ex: Executor, now: Date, halfLifeMs: number): Promise<Map<string, number>> {
    const l = this.last;
    const age = l ? now.getTime() - l.at : -1;
    if (l && l.halfLifeMs === halfLifeMs && age >= 0 && age < this.maxAgeMs) {
      const f = Math.pow(2, -age / halfLifeMs);
      return new Map([...l.usage].map(([k, v]) => [k, v * f]));
    }
    const usage = await decayedUsage(ex, now, halfLifeMs);
    this.last = { at: now.getTime(), halfLifeMs, usage };
    return usage;
  }
}

/** fairShareState reads what the fair-share order needs, once per pass. */
export async function fairShareState(ex: Executor, now: Date, halfLifeMs: number): Promise<FairShareState> {
  const [quotas, holders, usage] = [await projectQuotaList(ex), await cardHolders(ex), await decayedUsage(ex, now, halfLifeMs)];
  return { quotas, holders, usage };
}

/**
 * shareFor returns what the fair-share order needs to order `queue`, or undefined when it would order it as the plain
 * order does (priority, submit time): every job of one project (or none), and no quota names a
 * pool. Then the pass reads neither the cards held nor the usage. `usageCache`: the usage from it.
 */
export async function shareFor(ex: Executor, queue: readonly QueuedJob[], now: Date, halfLifeMs: number, usageCache?: UsageCache): Promise<FairShareState | undefined> {
  if (queue.length === 0) return undefined;
  const quotas = await projectQuotaList(ex);
  if (new Set(queue.map((j) => j.projectId ?? '')).size <= 1 && !quotas.some((q) => q.pool !== null)) return undefined;
  const usage = usageCache ? await usageCache.get(ex, now, halfLifeMs) : await decayedUsage(ex, now, halfLifeMs);
  return { quotas, holders: await cardHolders(ex), usage };
}

/**
 * fairShareMatters says whether the fair-share order could differ from the plain one for the QUEUED jobs now: they are of
 * more than one project, or a quota names a pool (shareFor's test, without reading the queue).
 */
export async function fairShareMatters(ex: Executor): Promise<boolean> {
  const [r] = await queryRows<{ mixed: boolean }>(
    ex,
    sql`select (select count(distinct coalesce(project_id, '')) from jobs where state = 'QUEUED') > 1 or exists (select 1 from project_quotas where pool <> '') as mixed`,
  );
  return r.mixed;
}

/** One line of gpuctl quota list: a project's quota, or a project with no quota that holds or wants cards. */
export interface QuotaLine {
  /** The project's name (as the driver reads it back: a leading U+FEFF is dropped), and its id. */
  project: string;
  projectId: string;
  /** null: the whole cluster. */
  pool: string | null;
  /** null: no quota (a guarantee of 0). */
  gpus: number | null;
  inUse: number;
  borrowed: number;
  /** Cards the project's QUEUED jobs that count against this quota want. */
  queuedCards: number;
  queuedJobs: number;
  /** Decayed card-hours of the project (all its pools). */
  usageCardHours: number;
  fairShareFactor: number;
}

/**
 * quotaLines returns a line per quota, and one per project without a quota that holds or wants cards (`queue`: the
 * QUEUED jobs, ./queued-jobs.ts queuedJobs), ordered by project name then pool (whole cluster first).
 */
export async function quotaLines(ex: Executor, queue: readonly QueuedJob[], now: Date, halfLifeMs: number): Promise<QuotaLine[]> {
  const state = await fairShareState(ex, now, halfLifeMs);
  const names = new Map((await ex.select({ id: projects.id, name: projects.name }).from(projects)).map((p) => [p.id, p.name]));
  const used = cardsInUse(state);
  const totalUsage = [...state.usage.values()].reduce((a, b) => a + b, 0);
  const lines = new Map<string, QuotaLine>();
  const lineOf = (projectId: string, q: ProjectQuota | null) => {
    const k = `${projectId}\u0000${q?.pool ?? ''}\u0000${q === null ? 'none' : 'quota'}`;
    let l = lines.get(k);
    if (!l) {
      const u = state.usage.get(projectId) ?? 0;
      l = { project: names.get(projectId) ?? projectId, projectId, pool: q?.pool ?? null, gpus: q?.gpus ?? null, inUse: 0, borrowed: 0, queuedCards: 0, queuedJobs: 0, usageCardHours: u / 3600, fairShareFactor: fairShareFactor(u, totalUsage) };
      lines.set(k, l);
    }
    return l;
  };
  for (const q of state.quotas) lineOf(q.projectId, q).inUse = used.get(`${q.projectId}\u0000${q.pool ?? ''}`) ?? 0;
  for (const h of state.holders) if (h.projectId && quotaFor(h.projectId, h.selector, state.quotas) === null) lineOf(h.projectId, null).inUse += h.cards;
  for (const job of queue) {
    if (!job.projectId) continue;
    const l = lineOf(job.projectId, quotaFor(job.projectId, job.selector, state.quotas));
    l.queuedJobs++;
    l.queuedCards += cardsOf(job);
  }
  for (const l of lines.values()) l.borrowed = Math.max(0, l.inUse - (l.gpus ?? 0));
  return [...lines.values()].sort((a, b) => (a.project < b.project ? -1 : a.project > b.project ? 1 : (a.pool ?? '') < (b.pool ?? '') ? -1 : (a.pool ?? '') > (b.pool ?? '') ? 1 : 0));
}
