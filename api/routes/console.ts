import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { changedIds, readVersions, type ChangeTopic, type Versions } from '../../db/queries/changes.ts';
import { CHANGE_TOPICS, ConsoleInfoSchema, StreamEvents, type ChangeEvent } from '../schemas/console.ts';
import type { ApiDeps } from '../deps.ts';
import { visibleProjectIds } from '../auth/auth.ts';

/** Where `npx vite build --config web/vite.config.ts` writes the console. */
export const consoleDist = fileURLToPath(new URL('../../web/dist', import.meta.url));
export const BUILD_HINT = 'the console is not built: run npx vite build --config web/vite.config.ts';

/** How often the shared watcher looks for changes while someone listens. */
const POLL_MS = 500;
/**
 * How long after a change the watcher names it again. Its counter moved before the writer
 * committed, so a page that refetched at once may have read the state before the commit; and
 * rows of the id range not yet committed were not named.
 */
const TRAIL_MS = 1000;
const PING_MS = 15_000;

/** A change to be named again: its topics and where its id range began. */
interface Trailing {
  due: number;
  topics: ChangeTopic[];
  metricAfter: number;
  eventAfter: number;
}

/**
 * Polls the database for all connected consoles at once: it runs only while someone listens,
 * and tells each listener what changed (never the data itself: pages refetch what they show).
 */
export class ChangeWatcher {
  private listeners = new Set<(e: ChangeEvent) => void>();
  private last: Versions | null = null;
  /** The metric-chunk and event ids named up to: the next change's range starts after them. */
  private mark = { metric: 0, event: 0 };
  private trailing: Trailing[] = [];
  private timer: NodeJS.Timeout | null = null;
  private failing = false;
  /** Bumped by stop(): a poll in flight when its loop was stopped does not go on. */
  private generation = 0;

  constructor(
    private readonly db: Db,
    private readonly log: FastifyBaseLogger,
    private readonly pollMs = POLL_MS,
    private readonly trailMs = TRAIL_MS,
  ) {}

  get size(): number {
    return this.listeners.size;
  }

  /** Whether the first poll is done: changes from then on are told. */
  get watching(): boolean {
    return this.last !== null;
  }

  subscribe(fn: (e: ChangeEvent) => void): () => void {
    this.listeners.add(fn);
    if (this.listeners.size === 1) this.schedule(0);
    return () => {
      this.listeners.delete(fn);
      if (this.listeners.size === 0) this.stop();
    };
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.last = null;
    this.trailing = [];
    this.generation++;
  }

  private schedule(ms: number): void {
    const gen = this.generation;
    this.timer = setTimeout(() => void this.tick(gen), ms);
  }

  private async tick(gen: number): Promise<void> {
    try {
      const v = await readVersions(this.db);
      if (gen !== this.generation) return;
      const prev = this.last;
      if (!prev) this.mark = { metric: v.metricId, event: v.eventId };
      // Only once the change is told: a poll that fails half-way is redone in full.
      else if (!(await this.compare(gen, prev, v))) return;
      this.last = v;
      this.failing = false;
    } catch (err) {
      // The database may be restarting: say so once, keep polling.
      if (!this.failing) this.log.warn({ err }, 'console change watcher: poll failed');
      this.failing = true;
    }
    if (gen === this.generation && this.listeners.size > 0) this.schedule(this.pollMs);
  }

  /** Names what changed since `prev`, with the changes of about a second ago again; false when stopped meanwhile. */
  private async compare(gen: number, prev: Versions, v: Versions): Promise<boolean> {
    const now = Date.now();
    const fresh = CHANGE_TOPICS.filter((t) => v[t] !== prev[t]);
    const due = this.trailing.filter((t) => t.due <= now);
    if (fresh.length === 0 && due.length === 0) return true;
    const topics = CHANGE_TOPICS.filter((t) => fresh.includes(t) || due.some((d) => d.topics.includes(t)));
    const metricAfter = Math.min(this.mark.metric, ...due.map((d) => d.metricAfter));
    const eventAfter = Math.min(this.mark.event, ...due.map((d) => d.eventAfter));
    const named = topics.includes('metrics') || topics.includes('events');
    const ids = named ? await changedIds(this.db, { metricAfter, metricUpTo: v.metricId, eventAfter, eventUpTo: v.eventId }) : { runIds: [], jobIds: [], truncated: false };
    if (gen !== this.generation) return false;
    this.trailing = this.trailing.filter((t) => t.due > now);
    if (fresh.length) this.trailing.push({ due: now + this.trailMs, topics: fresh, metricAfter: this.mark.metric, eventAfter: this.mark.event });
    if (named) this.mark = { metric: v.metricId, event: v.eventId };
    const event: ChangeEvent = { topics, run_ids: ids.runIds, job_ids: ids.jobIds, truncated: ids.truncated };
    for (const fn of this.listeners) fn(event);
    return true;
  }
}

function registerMissingBuild(app: FastifyInstance): void {
  const missing = async (_req: FastifyRequest, reply: FastifyReply) => reply.code(503).type('text/plain; charset=utf-8').send(`${BUILD_HINT}\n`);
  app.get('/', { schema: { hide: true } }, missing);
  app.get('/assets/*', { schema: { hide: true } }, missing);
}

/** Whether `file` is one of Vite's content-hashed assets: under web/dist/assets, wherever web/dist itself lies. */
function isHashedAsset(file: string): boolean {
  const rel = path.relative(consoleDist, file);
  return rel.split(path.sep)[0] === 'assets' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

/** The web console: its built assets at `/` and the change stream it listens to. */
export const consoleAssets = async (app: FastifyInstance): Promise<void> => {
  if (!fs.existsSync(path.join(consoleDist, 'index.html'))) {
    registerMissingBuild(app);
    return;
  }
  await app.register(fastifyStatic, {
    root: consoleDist,
    prefix: '/',
    cacheControl: false,
    // Vite names assets by content hash: they never change under one name.
    setHeaders: (res, file) => res.setHeader('cache-control', isHashedAsset(file) ? 'public, max-age=31536000, immutable' : 'no-cache'),
  });
};

/** Under /api/v1: what the console reads about the plane, and GET /stream (server-sent events). */
export const consoleRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  let watcher: ChangeWatcher | null = null;
  const streams = new Set<PassThrough>();
  // Open event streams would keep close() waiting for ever: end them first.
  app.addHook('preClose', async () => {
    for (const s of streams) s.end();
    watcher?.stop();
  });

  app.get(
    '/console',
    { schema: { tags: ['console'], summary: 'What the web console needs: the Temporal Web UI and namespace of job workflows', response: { 200: ConsoleInfoSchema } } },
    async () => ({ temporal_ui: deps.temporalUiUrl ?? null, namespace: deps.client?.options.namespace ?? null }),
  );

  app.get(
    '/stream',
    {
      schema: {
        tags: ['console'],
        summary: 'Server-sent events: a `change` event naming what changed (jobs, nodes, runs, metrics, events, checkpoints) whenever it does',
        response: { 200: StreamEvents },
      },
    },
    async (req, reply) => {
      watcher ??= new ChangeWatcher(deps.db, app.log);
      // A token restricted to some projects is told which topics changed, never which ids
      // (they may be other projects'): `truncated` makes its pages refetch, and lists are filtered.
      const restricted = (await visibleProjectIds(deps.db, req)) !== null;
      const out = new PassThrough();
      streams.add(out);
      const write = (s: string) => {
        if (!out.writableEnded) out.write(s);
      };
      const unsubscribe = watcher.subscribe((e) => write(`event: change\ndata: ${JSON.stringify(restricted ? { ...e, run_ids: [], job_ids: [], truncated: true } : e)}\n\n`));
      const ping = setInterval(() => write(': ping\n\n'), PING_MS);
      let closed = false;
      // Both the socket's and the stream's close call this: the second does nothing.
      const done = () => {
        if (closed) return;
        closed = true;
        clearInterval(ping);
        unsubscribe();
        streams.delete(out);
        out.end();
      };
      reply.raw.once('close', done);
      out.once('close', done);
      write('retry: 2000\nevent: hello\ndata: {}\n\n');
      // The schema describes the text; the body is a stream of it.
      return (reply as FastifyReply)
        .type('text/event-stream; charset=utf-8')
        .header('cache-control', 'no-store')
        .header('x-accel-buffering', 'no')
        .send(out);
    },
  );
};
