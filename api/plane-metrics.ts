/**
 * The series of GET /metrics (docs/prometheus.md), in a prom-client Registry of each app's own
 * (tests build many apps in one process; the global registry would refuse the second). What the
 * database knows (jobs, nodes, cards, job transitions) is read when Prometheus scrapes; what the
 * API itself does (requests, metric points) is counted as it happens.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Db } from '../db/client.ts';
import { gpuCardCountsByNode, jobCountsByStateProject, lastTransitionId, lastTransitionIdBefore, nodeCountsByStatus, oldestQueuedByProject, transitionsAfter, type CardMetricState, type NodeMetricStatus } from '../db/queries/plane-metrics.ts';
import { JOB_STATES, type JobState } from '../domain/job-states.ts';
import type { CardSample } from '../domain/telemetry.ts';

const NODE_STATUSES: readonly NodeMetricStatus[] = ['online', 'draining', 'offline'];
const CARD_STATES: readonly CardMetricState[] = ['free', 'owned', 'offline', 'draining'];
/** How an attempt that was dispatched ends: a move from DISPATCHING or RUNNING to one of these. */
const OUTCOMES: readonly JobState[] = ['SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED'];
/** New job transitions read per scrape at most (pages of TRANSITION_PAGE): a backlog is caught up over a few scrapes. */
const TRANSITION_PAGE = 2000;
const TRANSITION_PAGES = 5;

// Process metrics are the process's, not an app's: collected once, into one registry merged into every app's.
let processRegistry: Registry | null = null;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
    // Gauges named like counters, which promtool check metrics refuses: the handle counts without them are kept.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) processRegistry.removeSingleMetric(name);
  }
  return processRegistry;
}

/** One app's metrics: the registry GET /metrics writes out, and the instruments its routes feed. */
export class PlaneMetrics {
  readonly registry: Registry;
  readonly httpSeconds: Histogram<'route' | 'method' | 'status'>;
  readonly pointsIngested: Counter;
  private readonly jobs: Gauge<'state' | 'project'>;
  private readonly nodes: Gauge<'status'>;
  private readonly cards: Gauge<'node' | 'state'>;
  private readonly queueWait: Histogram<'project'>;
  private readonly oldestQueued: Gauge<'project'>;
  private readonly attempts: Counter<'outcome'>;
  private readonly gpuUtilization: Gauge<'node' | 'card'>;
  private readonly gpuMemoryUsed: Gauge<'node' | 'card'>;
  private readonly gpuOwned: Gauge<'node' | 'card'>;
  /** Each node's cards as its last telemetry report gave them (and which its attempts own), and until when that report counts (three of its intervals). */
  private readonly cardSamples = new Map<string, { cards: readonly CardSample[]; owned: ReadonlySet<number>; until: number }>();
  /** The newest job transition counted; null until the first scrape, which starts from the newest written before startedAt. */
  private cursor: number | null = null;
  /** When this process started counting: the counters' help says "since this API process started", not since the first scrape. */
  private readonly startedAt = new Date();
  /**
   * Jobs per project and state: counted whole every recountMs (and at the first scrape), kept
   * up to date in between from the transitions written after that count (countedUpTo), so that a
   * scrape does not pass over the jobs table; the recount also mends what a missed transition
   * (below) would leave wrong.
   */
  private jobCounts: Map<string, Map<JobState, number>> | null = null;
  private countedUpTo = 0;
  private countedAt = 0;
  private pending: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly recountMs = 300_000,
  ) {
    const own = new Registry();
    this.httpSeconds = new Histogram({
      name: 'gpuplane_http_request_duration_seconds',
      help: 'Time the API took to answer, by route pattern, method and status code',
      labelNames: ['route', 'method', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [own],
    });
    this.pointsIngested = new Counter({ name: 'gpuplane_metric_points_ingested_total', help: 'Metric points stored by this API process (POST /api/v1/runs/:id/metrics and MLflow log-metric/log-batch)', registers: [own] });
    this.jobs = new Gauge({ name: 'gpuplane_jobs', help: 'Jobs by state and project ("" for jobs of no project)', labelNames: ['state', 'project'], registers: [own] });
    this.nodes = new Gauge({ name: 'gpuplane_nodes', help: 'Nodes by status: online, draining (online and drained), offline', labelNames: ['status'], registers: [own] });
    this.cards = new Gauge({ name: 'gpuplane_gpu_cards', help: "GPU cards by node and state: owned by a job's attempt, offline, draining, or free", labelNames: ['node', 'state'], registers: [own] });
    this.queueWait = new Histogram({
      name: 'gpuplane_queue_wait_seconds',
      help: 'How long jobs waited QUEUED before they were dispatched, by project, counted from the job history since this API process started',
      labelNames: ['project'],
      buckets: [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 21_600, 86_400],
      registers: [own],
    });
    this.oldestQueued = new Gauge({ name: 'gpuplane_queue_oldest_wait_seconds', help: 'How long the longest-waiting QUEUED job of each project has waited so far (projects with none queued are absent)', labelNames: ['project'], registers: [own] });
    this.attempts = new Counter({ name: 'gpuplane_attempts_total', help: 'Dispatched attempts that ended, by outcome (the state they ended in), counted from the job history since this API process started', labelNames: ['outcome'], registers: [own] });
    for (const outcome of OUTCOMES) this.attempts.inc({ outcome }, 0);
    this.gpuUtilization = new Gauge({ name: 'gpuplane_gpu_utilization_ratio', help: "A card's utilization (0-1), the highest its agent saw over its last telemetry interval (GPUPLANE_TELEMETRY_S); absent once the node stops reporting", labelNames: ['node', 'card'], registers: [own] });
    this.gpuOwned = new Gauge({ name: 'gpuplane_gpu_owned', help: "1 while a job's attempt runs on the card, 0 while it is free, from its agent's last telemetry report (the idle-card alert joins it)", labelNames: ['node', 'card'], registers: [own] });
    this.gpuMemoryUsed = new Gauge({ name: 'gpuplane_gpu_memory_used_bytes', help: "A card's memory in use, from its agent's last telemetry report", labelNames: ['node', 'card'], registers: [own] });
    this.registry = Registry.merge([processMetrics(), own]);
  }

  /** A node's telemetry report (api/routes/telemetry.ts): its cards' gauges until three of its intervals pass without another. */
  cardTelemetry(nodeId: string, cards: readonly CardSample[], owned: ReadonlySet<number>, now: number, intervalS: number): void {
    this.cardSamples.set(nodeId, { cards, owned, until: now + 3 * intervalS * 1000 });
  }

  /** Reads what the database knows into the gauges and counters; concurrent scrapes share one read. */
  refresh(): Promise<void> {
    this.pending ??= this.read().finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  /** The scrape: the Prometheus text format. */
  async text(): Promise<string> {
    await this.refresh();
    return this.registry.metrics();
  }

  private async read(): Promise<void> {
    if (this.jobCounts === null || Date.now() - this.countedAt >= this.recountMs) await this.countJobs();
    const [nodes, cards, oldest] = await Promise.all([nodeCountsByStatus(this.db), gpuCardCountsByNode(this.db), oldestQueuedByProject(this.db), this.readTransitions()]);
    // Every state of each project and node is written, zeros too: a series that drops to 0 reads 0, not absent.
    this.jobs.reset();
    for (const [project, byState] of this.jobCounts!) for (const state of JOB_STATES) this.jobs.set({ state, project }, Math.max(0, byState.get(state) ?? 0));
    this.nodes.reset();
    for (const status of NODE_STATUSES) this.nodes.set({ status }, 0);
    for (const r of nodes) this.nodes.set({ status: r.status }, r.n);
    this.oldestQueued.reset();
    for (const r of oldest) this.oldestQueued.set({ project: r.project }, r.waitedS);
    this.gpuUtilization.reset();
    this.gpuMemoryUsed.reset();
    this.gpuOwned.reset();
    const now = Date.now();
    for (const [node, t] of this.cardSamples) {
      if (t.until < now) {
        this.cardSamples.delete(node);
        continue;
      }
      for (const c of t.cards) {
        this.gpuUtilization.set({ node, card: String(c.index) }, c.utilization / 100);
        this.gpuMemoryUsed.set({ node, card: String(c.index) }, c.memoryUsedMb * 1048576);
        this.gpuOwned.set({ node, card: String(c.index) }, t.owned.has(c.index) ? 1 : 0);
      }
    }
    this.cards.reset();
    for (const node of new Set(cards.map((r) => r.node))) for (const state of CARD_STATES) this.cards.set({ node, state }, 0);
    for (const r of cards) this.cards.set({ node: r.node, state: r.state }, r.n);
  }

  /** Counts the jobs by project and state, and the newest transition, in one snapshot. */
  private async countJobs(): Promise<void> {
    const { rows, upTo } = await this.db.transaction(async (tx) => ({ rows: await jobCountsByStateProject(tx), upTo: await lastTransitionId(tx) }), { isolationLevel: 'repeatable read' });
    // Jobs of no project are written from the start, every state at 0, so that a fresh plane has the series.
    const counts = new Map<string, Map<JobState, number>>([['', new Map()]]);
    for (const r of rows) {
      if (!counts.has(r.project)) counts.set(r.project, new Map());
      counts.get(r.project)!.set(r.state, r.n);
    }
    this.jobCounts = counts;
    this.countedUpTo = upTo;
    this.countedAt = Date.now();
  }

  /** A job of `project` moved from one state (null: it was made) to another. */
  private moveJob(project: string, from: JobState | null, to: JobState): void {
    if (!this.jobCounts!.has(project)) this.jobCounts!.set(project, new Map());
    const byState = this.jobCounts!.get(project)!;
    if (from) byState.set(from, (byState.get(from) ?? 0) - 1);
    byState.set(to, (byState.get(to) ?? 0) + 1);
  }

  /**
   * Counts the job transitions written since the last scrape (by id: a transition whose
   * transaction commits after a newer one was read is missed, a rare undercount). The control
   * worker makes them; the API reads them, so the counters start at 0 with this process, and
   * count what was written since it started (the transitions' time, the database's clock, against
   * this process's) from the first scrape on.
   */
  private async readTransitions(): Promise<void> {
    this.cursor ??= await lastTransitionIdBefore(this.db, this.startedAt);
    for (let page = 0; page < TRANSITION_PAGES; page++) {
      const rows = await transitionsAfter(this.db, this.cursor, TRANSITION_PAGE);
      for (const t of rows) {
        if (t.to === 'DISPATCHING' && t.queuedS !== null) this.queueWait.observe({ project: t.project }, Math.max(0, t.queuedS));
        if ((t.from === 'DISPATCHING' || t.from === 'RUNNING') && OUTCOMES.includes(t.to)) this.attempts.inc({ outcome: t.to });
        if (t.id > this.countedUpTo) this.moveJob(t.project, t.from, t.to);
        this.cursor = t.id;
      }
      if (rows.length < TRANSITION_PAGE) break;
    }
  }
}
