/**
 * Webhooks and their outbox, the events table (docs/webhooks.md): a webhook's cursor is the id of
 * the last event it is done with; what it still owes are the events after it that it subscribed to.
 */
import { and, asc, eq, gt, inArray, lte, or, sql, type SQL } from 'drizzle-orm';
import { isDirectEvent, type SourceEvent, type WebhookEventName, type WebhookFormat } from '../../domain/webhooks.ts';
import { queryRows, type Executor } from '../client.ts';
import { events, jobs, projects, runs, webhooks, type Webhook } from '../schema.ts';

/** A webhook with its project's name. */
export interface WebhookRow extends Webhook {
  project: string | null;
}

const JOB_END_STATES: Partial<Record<WebhookEventName, string>> = { 'job.failed': 'FAILED', 'job.succeeded': 'SUCCEEDED', 'job.lost': 'LOST' };

/** The events of the table that are one of `names` (domain/webhooks.ts webhookEventOf, in SQL). */
function subscribedTo(names: readonly WebhookEventName[]): SQL {
  const ends = names.map((n) => JOB_END_STATES[n]).filter((s): s is string => s !== undefined);
  const direct = names.filter(isDirectEvent);
  const parts: SQL[] = [];
  if (ends.length) parts.push(sql`(${events.kind} = 'job.state' and ${events.data}->>'to' in (${sql.join(ends.map((s) => sql`${s}`), sql`, `)}) and ${events.data}->>'from' is distinct from ${events.data}->>'to')`);
  if (names.includes('run.crashed')) parts.push(sql`(${events.kind} = 'run.status' and ${events.data}->>'status' = 'crashed')`);
  if (direct.length) parts.push(inArray(events.kind, direct));
  return parts.length ? or(...parts)! : sql`false`;
}

/** The project id of an event: its job's, else its run's. */
const eventProjectId = sql<string | null>`coalesce(${jobs.projectId}, ${runs.projectId})`;

/** What a webhook owes: the events after its cursor it subscribed to, of its project if it has one. */
function owed(w: Webhook, upTo?: number): SQL {
  return and(gt(events.id, w.cursor), upTo === undefined ? undefined : lte(events.id, upTo), subscribedTo(w.events), w.projectId ? sql`${eventProjectId} = ${w.projectId}` : undefined)!;
}

/** insertWebhook adds a webhook whose cursor is the newest event: it hears of what happens from now on. */
export async function insertWebhook(ex: Executor, w: { id: string; url: string; events: WebhookEventName[]; projectId: string | null; secret: string; format: WebhookFormat; createdBy: string }): Promise<Webhook> {
  const [row] = await ex
    .insert(webhooks)
    .values({ ...w, cursor: sql`(select coalesce(max(${events.id}), 0) from ${events})` })
    .returning();
  return row;
}

const withProject = { w: webhooks, project: projects.name };

/** getWebhook returns a webhook with its project's name, or undefined. */
export async function getWebhook(ex: Executor, id: string): Promise<WebhookRow | undefined> {
  const [r] = await ex.select(withProject).from(webhooks).leftJoin(projects, eq(projects.id, webhooks.projectId)).where(eq(webhooks.id, id));
  return r ? { ...r.w, project: r.project } : undefined;
}

/** listWebhooks returns the webhooks of these project ids (null: all, webhooks of no project too), oldest first. */
export async function listWebhooks(ex: Executor, projectIds: string[] | null): Promise<WebhookRow[]> {
  const rows = await ex
    .select(withProject)
    .from(webhooks)
    .leftJoin(projects, eq(projects.id, webhooks.projectId))
    .where(projectIds === null ? undefined : projectIds.length ? inArray(webhooks.projectId, projectIds) : sql`false`)
    .orderBy(asc(webhooks.createdAt), asc(webhooks.id));
  return rows.map((r) => ({ ...r.w, project: r.project }));
}

/** webhookIds returns the id of every webhook (the control worker keeps a delivery workflow running for each). */
export async function webhookIds(ex: Executor): Promise<string[]> {
  return (await ex.select({ id: webhooks.id }).from(webhooks)).map((r) => r.id);
}

/** deleteWebhook removes a webhook; returns whether there was one. */
export async function deleteWebhook(ex: Executor, id: string): Promise<boolean> {
  return (await ex.delete(webhooks).where(eq(webhooks.id, id)).returning({ id: webhooks.id })).length > 0;
}

/** projectOfWebhook returns the name of a webhook's project: null for one of every project, undefined when there is no such webhook. */
export async function projectOfWebhook(ex: Executor, id: string): Promise<string | null | undefined> {
  return (await getWebhook(ex, id))?.project;
}

/** webhookBacklog returns how many events a webhook still owes its receiver. */
export async function webhookBacklog(ex: Executor, w: Webhook): Promise<number> {
  const [r] = await ex
    .select({ n: sql<number>`count(*)::int` })
    .from(events)
    .leftJoin(jobs, eq(jobs.id, events.jobId))
    .leftJoin(runs, eq(runs.id, events.runId))
    .where(owed(w));
  return r.n;
}

/** owedEvents returns up to `limit` events a webhook owes with ids up to `upTo`, in id order, each with its project's name. */
export async function owedEvents(ex: Executor, w: Webhook, upTo: number, limit: number): Promise<SourceEvent[]> {
  const rows = await ex
    .select({ e: events, project: projects.name })
    .from(events)
    .leftJoin(jobs, eq(jobs.id, events.jobId))
    .leftJoin(runs, eq(runs.id, events.runId))
    .leftJoin(projects, eq(projects.id, eventProjectId))
    .where(owed(w, upTo))
    .orderBy(asc(events.id))
    .limit(limit);
  return rows.map(({ e, project }) => ({ id: e.id, kind: e.kind, jobId: e.jobId, runId: e.runId, attempt: e.attempt, message: e.message, data: e.data, at: e.at, project }));
}

/** eventById returns one event as a delivery reads it, or undefined. */
export async function eventById(ex: Executor, id: number): Promise<SourceEvent | undefined> {
  const [r] = await ex
    .select({ e: events, project: projects.name })
    .from(events)
    .leftJoin(jobs, eq(jobs.id, events.jobId))
    .leftJoin(runs, eq(runs.id, events.runId))
    .leftJoin(projects, eq(projects.id, eventProjectId))
    .where(eq(events.id, id));
  return r ? { id: r.e.id, kind: r.e.kind, jobId: r.e.jobId, runId: r.e.runId, attempt: r.e.attempt, message: r.e.message, data: r.e.data, at: r.e.at, project: r.project } : undefined;
}

/** eventIdsAfter returns the ids of up to `limit` events after `after`, in order (the event tail reads them to find gaps). */
export async function eventIdsAfter(ex: Executor, after: number, limit: number): Promise<number[]> {
  return (await ex.select({ id: events.id }).from(events).where(gt(events.id, after)).orderBy(asc(events.id)).limit(limit)).map((r) => r.id);
}

/** lowestWebhookCursor returns the smallest cursor of any webhook, or null when there is none. */
export async function lowestWebhookCursor(ex: Executor): Promise<number | null> {
  const [r] = await queryRows<{ c: string | null }>(ex, sql`select min(${webhooks.cursor})::text as c from ${webhooks}`);
  return r?.c === null || r?.c === undefined ? null : Number(r.c);
}

/** advanceWebhookCursor moves a webhook's cursor forward to `to` (never back); returns whether the webhook exists. */
export async function advanceWebhookCursor(ex: Executor, id: string, to: number): Promise<boolean> {
  await ex.update(webhooks).set({ cursor: to }).where(and(eq(webhooks.id, id), sql`${webhooks.cursor} < ${to}`));
  return (await ex.select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.id, id))).length > 0;
}

/** markWebhookDelivered records a 2xx for event `eventId`: the cursor passes it, in the same statement as the success time. */
export async function markWebhookDelivered(ex: Executor, id: string, eventId: number, at: Date): Promise<void> {
  await ex
    .update(webhooks)
    .set({ cursor: sql`greatest(${webhooks.cursor}, ${eventId})`, lastSuccessAt: at })
    .where(eq(webhooks.id, id));
}

/** markWebhookFailed records a failed try (or a given-up event, with `passEventId` moving the cursor past it). */
export async function markWebhookFailed(ex: Executor, id: string, error: string, at: Date, passEventId?: number): Promise<void> {
  await ex
    .update(webhooks)
    .set({ lastFailureAt: at, lastError: error.slice(0, 1000), ...(passEventId !== undefined ? { cursor: sql`greatest(${webhooks.cursor}, ${passEventId})` } : {}) })
    .where(eq(webhooks.id, id));
}

