/**
 * The lineage tree of a run: up its forked_from links to the run that forked from none, then down
 * through every fork of every checkpoint, with each branch's config diff (domain/attempt-config.ts
 * diffConfigs, as `gpuctl job` shows a retry's).
 */
import type { Db } from '../db/client.ts';
import { projectOfRun } from '../db/queries/auth.ts';
import { checkpointsOfRuns, forkParentOf, forksOf, type LineageCheckpoint } from '../db/queries/lineage.ts';
import { configOfAttempt } from '../db/queries/next-attempt.ts';
import { getRuns, type RunWithNames } from '../db/queries/runs.ts';
import { diffConfigs, type ConfigChange } from '../domain/attempt-config.ts';

/** The most runs a tree answers; a deeper or wider one is cut there. */
const MAX_RUNS = 1000;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The config an attempt ran with, or null for a run or checkpoint of no job. */
async function configOf(db: Db, jobId: string | null, attempt: number | null) {
  return jobId && attempt !== null ? configOfAttempt(db, jobId, attempt) : null;
}

/**
 * withRunLogged adds to each `params.X` change the value the parent's run logged for X, where it
 * logged one: a job given no lr whose script used 0.02 reads `params.lr null → 0.005` against
 * what the job was given, and shows the 0.02 beside it.
 */
export function withRunLogged(changes: ConfigChange[], runParams: Record<string, unknown> | undefined): (ConfigChange & { run_logged?: unknown })[] {
  return changes.map((c) => {
    const name = c.key.startsWith('params.') ? c.key.slice('params.'.length) : null;
    return name !== null && runParams && Object.hasOwn(runParams, name) ? { ...c, run_logged: runParams[name] } : c;
  });
}

/** The diff at a branch: from the attempt that registered the fork's checkpoint to the fork's attempt, with its run's logged params. */
async function branchChanges(db: Db, run: RunWithNames, fork: LineageCheckpoint | undefined, parent: RunWithNames | undefined) {
  if (!fork) return [];
  const [from, to] = await Promise.all([configOf(db, fork.jobId, fork.attempt), configOf(db, run.jobId, run.attempt)]);
  return from && to ? withRunLogged(diffConfigs(from, to), parent?.params) : [];
}

/** The root of a run's tree: the run it descends from by forks that forked from none, or from one the caller may not read. */
async function rootOf(db: Db, runId: string, mayRead: (project: string | null) => boolean): Promise<string> {
  const seen = new Set([runId]);
  let root = runId;
  for (;;) {
    const parent = await forkParentOf(db, root);
    if (!parent || seen.has(parent) || seen.size >= MAX_RUNS) return root;
    const project = await projectOfRun(db, parent);
    if (project === undefined || !mayRead(project)) return root;
    seen.add(parent);
    root = parent;
  }
}

/**
 * lineageOf returns the tree that holds the run, depth first from its root, each run before its
 * forks (oldest first); a run whose project `mayRead` refuses is left out with its forks (an
 * ancestor: the tree starts below it).
 */
export async function lineageOf(db: Db, runId: string, mayRead: (project: string | null) => boolean) {
  const root = await rootOf(db, runId, mayRead);
  const forks = new Map<string, string[]>();
  const all = new Set([root]);
  for (let level = [root]; level.length > 0 && all.size < MAX_RUNS; ) {
    const next: string[] = [];
    for (const f of await forksOf(db, level)) {
      if (all.has(f.runId) || all.size >= MAX_RUNS) continue;
      all.add(f.runId);
      next.push(f.runId);
      forks.set(f.parentRunId, [...(forks.get(f.parentRunId) ?? []), f.runId]);
    }
    level = next;
  }
  const [runs, ckpts] = await Promise.all([getRuns(db, [...all]), checkpointsOfRuns(db, [...all])]);
  const ckptById = new Map(ckpts.map((c) => [c.id, c]));
  const ordered: { run: RunWithNames; depth: number }[] = [];
  const walk = (id: string, depth: number) => {
    const run = runs.get(id);
    if (!run || !mayRead(run.projectName)) return;
    ordered.push({ run, depth });
    for (const kid of forks.get(id) ?? []) walk(kid, depth + 1);
  };
  walk(root, 0);
  return {
    root_run_id: root,
    runs: await Promise.all(
      ordered.map(async ({ run, depth }) => ({
        id: run.id,
        name: run.name,
        project: run.projectName,
        experiment: run.experimentName,
        job_id: run.jobId,
        attempt: run.attempt,
        status: run.status,
        depth,
        forked_from: run.forkedFrom ? { checkpoint_id: run.forkedFrom.checkpointId, run_id: run.forkedFrom.runId, step: run.forkedFrom.step } : null,
        changes: depth === 0 ? [] : await branchChanges(db, run, run.forkedFrom ? ckptById.get(run.forkedFrom.checkpointId) : undefined, run.forkedFrom ? runs.get(run.forkedFrom.runId) : undefined),
        checkpoints: ckpts.filter((c) => c.runId === run.id).map((c) => ({ id: c.id, step: c.step, parent_checkpoint_id: c.parentCheckpointId, deleted_at: iso(c.deletedAt) })),
      })),
    ),
  };
}
