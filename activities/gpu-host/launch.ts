import type { Static } from '@sinclair/typebox';
import type { LaunchSchema } from '../../api/routes/launch.ts';
import type { AttemptSpec } from '../../workflows/types.ts';
import type { GpuHostDeps } from './deps.ts';
import type { AttemptNote } from './attempt-note.ts';

/*
 * The agent's two calls to the API about an attempt it starts (api/routes/launch.ts): confirm
 * what was dispatched (and fetch its secret variables), then report that it started.
 */

/** How long an attempt's start waits for the API to confirm it (and hand over its secret variables). */
const LAUNCH_WAIT_MS = 60_000;

/** GET /jobs/:id/attempts/:n/launch's answer, as the route's schema says. */
type LaunchJson = Static<typeof LaunchSchema>;

type ApiOf = Pick<GpuHostDeps, 'apiUrl' | 'nodeId' | 'nodeToken'>;

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const sortedEntries = (o: Record<string, string>) => Object.entries(o).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));

/** What a task from Temporal says differently from the dispatch the API confirms, or null when they agree. */
export function launchMismatch(spec: AttemptSpec, nodeId: string, l: LaunchJson): string | null {
  if (l.node_id !== nodeId) return `node ${nodeId} (dispatched to ${l.node_id})`;
  if ((spec.runId ?? null) !== l.run_id) return `run ${spec.runId}`;
  if (!sameJson(spec.command, l.command)) return 'another command';
  if (spec.workingDir !== l.working_dir) return `working dir ${spec.workingDir}`;
  if (!sameJson(sortedEntries(spec.env), sortedEntries(l.env))) return 'another environment';
  if (!sameJson(spec.gpuIndices, l.gpu_indices)) return `cards ${spec.gpuIndices.join(',')}`;
  if ((spec.watchDir ?? null) !== l.watch_dir) return `checkpoint folder ${spec.watchDir}`;
  // The code it unpacks: a task may not name another snapshot (another project's) than the job's.
  if (!sameJson(spec.code ? { key: spec.code.key, sha256: spec.code.sha256 } : null, l.code ?? null)) return `code ${spec.code?.sha256 ?? 'none'}`;
  // The image it runs in: a task may not name another (what runs is the image's as much as the command's).
  if ((spec.image ?? null) !== (l.image ?? null)) return `image ${spec.image ?? 'none'}`;
  // A gang member is told where the others are: the task must say what the database holds.
  const g = spec.gang ? { rank: spec.gang.rank, master_port: spec.gang.masterPort, members: spec.gang.members.map((m) => ({ node_id: m.nodeId, address: m.address, gpu_indices: m.gpuIndices })) } : null;
  if (!sameJson(g, l.gang ?? null)) return spec.gang ? `rank ${spec.gang.rank} of a gang dispatched otherwise` : 'a single-node job (dispatched as a gang)';
  return null;
}

/** An attempt's route on the API: `launch` (confirm it, fetch its secrets) or `started`. */
export const attemptUrl = (api: ApiOf, spec: Pick<AttemptSpec, 'jobId' | 'attempt'>, what: 'launch' | 'started' | 'events' | 'checkpoints/stored' | 'code') => `${api.apiUrl.replace(/\/$/, '')}/api/v1/jobs/${encodeURIComponent(spec.jobId)}/attempts/${spec.attempt}/${what}`;

/**
 * What the control plane dispatched for this attempt, from the API with the node token: the
 * attempt starts only when the task from Temporal says the same (anyone who reaches Temporal
 * can put a task on this node's queue; only the control plane writes the database), and it
 * gets its secret variables from here (they never travel through Temporal, and are written to
 * no file). The API may be restarting: it is asked for up to LAUNCH_WAIT_MS, heartbeating
 * meanwhile. Without a node token (a node that is never given work) nothing is checked.
 */
export async function confirmLaunch(api: ApiOf, spec: AttemptSpec): Promise<{ secrets: Record<string, string> } | { refused: string }> {
  if (!api.nodeToken) return spec.secretEnv?.length ? { refused: `the job has secret variables (${spec.secretEnv.join(', ')}) and this agent has no node token to fetch them with (gpuctl agent --token)` } : { secrets: {} };
  const url = attemptUrl(api, spec, 'launch');
  const deadline = Date.now() + LAUNCH_WAIT_MS;
  let last = '';
  for (let delay = 250; ; delay = Math.min(delay * 2, 5000)) {
    try {
      const res = await fetch(url, { headers: { authorization: `Bearer ${api.nodeToken}` }, signal: AbortSignal.timeout(15_000) });
      const body = (await res.json().catch(() => ({}))) as Partial<LaunchJson> & { message?: string };
      if (res.ok && body.secret_env) {
        const differs = launchMismatch(spec, api.nodeId, body as LaunchJson);
        return differs ? { refused: `refused: the task says ${differs}, which is not what the control plane dispatched` } : { secrets: body.secret_env };
      }
      last = `${res.status} ${body.message ?? ''}`.trim();
      if (res.status >= 400 && res.status < 500) return { refused: `refused: the control plane does not confirm this attempt (${last})` };
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() + delay > deadline) break;
    await new Promise((r) => setTimeout(r, delay));
  }
  return { refused: `could not confirm the attempt with the API (and fetch its secret variables): ${last}` };
}

/**
 * POST /jobs/:id/attempts/:n/started (api/routes/launch.ts); a 4xx (the attempt moved on) is
 * final. A 5xx or 429 throws a plain Error: the caller retries it in the background (retryWhile),
 * never through Temporal.
 */
export async function reportStarted(api: ApiOf, spec: AttemptSpec, pid: number, logPath: string): Promise<void> {
  const res = await fetch(attemptUrl(api, spec, 'started'), {
    method: 'POST',
    headers: { authorization: `Bearer ${api.nodeToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ pid, log_path: logPath }),
    signal: AbortSignal.timeout(15_000),
  });
  await res.arrayBuffer().catch(() => undefined);
  if (res.status >= 500 || res.status === 429) throw new Error(`the API answered ${res.status} to the start report`);
}

/**
 * POST /jobs/:id/attempts/:n/events: an event of the attempt seen on the node (what its checkpoint
 * watcher skipped or refused), into the attempt's history. Throws on anything but 201.
 */
export async function reportAttemptEvent(api: ApiOf, spec: Pick<AttemptSpec, 'jobId' | 'attempt'>, n: AttemptNote): Promise<void> {
  const res = await fetch(attemptUrl(api, spec, 'events'), {
    method: 'POST',
    headers: { authorization: `Bearer ${api.nodeToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ kind: n.kind, level: n.level ?? 'warning', message: n.message, ...(n.data ? { data: n.data } : {}) }),
    signal: AbortSignal.timeout(15_000),
  });
  await res.arrayBuffer().catch(() => undefined);
  if (res.status !== 201) throw new Error(`the API answered ${res.status}`);
}

/** Tells the API a checkpoint of the attempt was stored in the plane's store, or why not (checkpoint-upload.ts); the HTTP status. */
export async function reportStored(api: ApiOf, spec: Pick<AttemptSpec, 'jobId' | 'attempt'>, body: object): Promise<number> {
  const res = await fetch(attemptUrl(api, spec, 'checkpoints/stored'), {
    method: 'POST',
    headers: { authorization: `Bearer ${api.nodeToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  await res.arrayBuffer().catch(() => undefined);
  return res.status;
}
