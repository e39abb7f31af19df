/**
 * The peer-witness loop (issue 46, docs/outage-rule.md "Peer witnesses"): twice a second it reads
 * what the agents' peer reports say (db/queries/peers.ts), judges every node by
 * domain/peer-witness.ts, stores the verdicts (a SUSPECT or dead node takes no new attempt:
 * db/queries/dispatch.ts), and for a dead node fences its live attempts and tells their job
 * workflows, which end them LOST at once through the ordinary LOST path (re-queued by policy, a
 * gang's other members stopped). It needs only the database and Temporal; while either is away it
 * does nothing, and a missed pass starts the "cluster heard" stretch again, so a control plane
 * that did not look never vouches that it heard.
 */
import type { Client } from '@temporalio/client';
import { fenceAttemptsOnNode, peerView, setPeerVerdicts } from '../../db/queries/peers.ts';
import type { Db } from '../../db/client.ts';
import { clusterHeardSince, clusterVerdicts, DEFAULT_WITNESS_SETTINGS, WITNESS_REPORT_INTERVAL_MS, type HeardStretch, type Verdict, type WitnessSettings } from '../../domain/peer-witness.ts';
import { assignWitnesses } from '../../domain/witness-assignment.ts';
import { nodeDeclaredDeadSignal } from '../../workflows/job-messages.ts';
import { jobWorkflowId } from '../../workflows/names.ts';

/** The shortest GPUPLANE_DEAD_AFTER_S the rule allows: more than heardNormally + one heartbeat + one pass (domain/peer-witness.ts). */
export const MIN_DEAD_AFTER_MS = 5000;
/** Passes run this often, so that two evaluations are never more than WITNESS_REPORT_INTERVAL_MS apart (clusterHeardSince's gap). */
export const PEER_PASS_EVERY_MS = 500;
/** A fenced attempt's workflow is told again this often until the attempt has ended (the first signal may have met a Temporal outage). */
const RESIGNAL_MS = 5000;

export interface PeerVerdictLoop {
  /** Passes done so far (tests wait for passes, not for time). */
  passes(): number;
  stop(): void;
}

/** peerSettings returns the rule's settings for GPUPLANE_DEAD_AFTER_S in ms; null when 0 (off). Throws one line on a value the rule cannot keep. */
export function peerSettings(deadAfterMs: number): WitnessSettings | null {
  if (deadAfterMs === 0) return null;
  if (!(deadAfterMs >= MIN_DEAD_AFTER_MS)) throw new Error(`GPUPLANE_DEAD_AFTER_S must be 0 (off) or at least ${MIN_DEAD_AFTER_MS / 1000}, got ${deadAfterMs / 1000}`);
  return { ...DEFAULT_WITNESS_SETTINGS, deadAfterMs };
}

/** startPeerVerdicts runs the loop every PEER_PASS_EVERY_MS until stopped. */
export function startPeerVerdicts(o: { db: Db; client: Client; settings: WitnessSettings; warn: (line: string) => void; info: (line: string) => void; everyMs?: number }): PeerVerdictLoop {
  const s = o.settings;
  let stretch: HeardStretch | null = null;
  const written = new Map<string, Verdict>();
  const signalled = new Map<string, number>();
  let lastFailure = 0;

  const pass = async () => {
    const view = await peerView(o.db);
    const ids = view.members.map((m) => m.id);
    const lastHeard = new Map(view.members.map((m) => [m.id, m.reportedAtMs] as [string, number]));
    stretch = clusterHeardSince(stretch, view.now, lastHeard, s, WITNESS_REPORT_INTERVAL_MS);
    const verdicts = clusterVerdicts({ now: view.now, lastHeard, witnesses: assignWitnesses(ids, s.k), reports: view.reports, heardSince: stretch?.since ?? null }, s);
    const changed = [...verdicts].filter(([id, v]) => written.get(id) !== v.verdict).map(([nodeId, v]) => ({ nodeId, verdict: v.verdict, reason: v.reason }));
    await setPeerVerdicts(o.db, changed);
    for (const c of changed) {
      written.set(c.nodeId, c.verdict);
      if (c.verdict === 'dead' || c.verdict === 'suspect') o.info(`node ${c.nodeId} ${c.verdict === 'dead' ? 'declared dead' : 'SUSPECT'}: ${c.reason}`);
    }
    for (const [nodeId, v] of verdicts) {
      if (v.verdict !== 'dead') continue;
      // Fenced first, in its own commit: from here nothing the attempt sends is accepted, whether or not the signal gets through.
      for (const a of await fenceAttemptsOnNode(o.db, nodeId)) {
        const key = `${a.jobId}#${a.attempt}#${nodeId}`;
        if (Date.now() - (signalled.get(key) ?? 0) < RESIGNAL_MS) continue;
        signalled.set(key, Date.now());
        await o.client.workflow
          .getHandle(jobWorkflowId(a.jobId))
          .signal(nodeDeclaredDeadSignal, { attempt: a.attempt, nodeId, reason: v.reason })
          .catch((err: unknown) => {
            signalled.delete(key);
            o.warn(`could not tell job ${a.jobId} that node ${nodeId} is dead: ${(err as Error).message}`);
          });
      }
    }
    if (signalled.size > 10_000) signalled.clear();
  };

  let passes = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const tick = () => {
    void pass()
      .then(() => void passes++)
      .catch((err: unknown) => {
        if (Date.now() - lastFailure > 60_000) o.warn(`peer verdicts: ${(err as Error).message}`);
        lastFailure = Date.now();
      })
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, o.everyMs ?? PEER_PASS_EVERY_MS);
      });
  };
  tick();
  return {
    passes: () => passes,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
