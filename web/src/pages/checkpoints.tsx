/**
 * Checkpoints of a run, experiment or project: a leaderboard that tells the evaluation story
 * (each run's checkpoints by step, the evaluated primary metric beside the training metric at that
 * step, so the step where the evaluated value turns up while the training one keeps falling shows),
 * ranked as GET /checkpoints/best ranks, the best one badged; a checkpoint's resume chain and
 * evaluations (checkpoint-detail.tsx), and an Evaluate button.
 */
import { metricFor, rankCheckpoints, type BestCandidate } from '../../../domain/best-checkpoint.ts';
import { api, ApiError } from '../api.ts';
import { ErrorBox, JobLink, Loading, RunLink, When } from '../components.tsx';
import { bytes, metric } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import type { CheckpointList, CheckpointsQuery, ListedCheckpoint } from '../types.ts';
import { CheckpointDetail, EvaluateButton } from './checkpoint-detail.tsx';
import { StorageBadge } from './checkpoint-storage.tsx';

const LEVEL = { experiment: "the experiment's setting", project: "the project's setting", default: 'the default (no setting)' } as const;

type Candidate = BestCandidate & { c: ListedCheckpoint };

/**
 * Each checkpoint's rank as GET /checkpoints/best ranks (domain/best-checkpoint.ts): evaluated
 * values where any checkpoint has one, training-time values otherwise, ties to the later step.
 * Deleted checkpoints are not ranked (best never picks them).
 */
function ranks(l: CheckpointList) {
  const live: Candidate[] = l.checkpoints
    .filter((c) => !c.deleted_at)
    .map((c) => ({ c, id: c.id, step: c.step, createdAt: new Date(c.created_at), evalMetrics: c.eval_metrics, trainMetrics: c.train_metrics }));
  // A setting names its metric; the default depends on which metrics the ranked ones have.
  const metric = l.metric.level === 'default' ? metricFor(live, { experiment: null, project: null }) : l.metric;
  const { ranked } = rankCheckpoints(live, metric);
  return { metric, rankOf: new Map(ranked.map((r, i) => [r.checkpoint.id, i + 1])) };
}

/**
 * The rows in the API's order (the newest run first, each run's checkpoints by step), the columns
 * named by the API's metric: its evaluated value, and its train_metric's value at the step.
 */
function Leaderboard({ l, rankOf, selectedId, bestId, link, reload }: { l: CheckpointList; rankOf: Map<string, number>; selectedId: string | null; bestId?: string; link: (id: string) => string; reload: () => void }) {
  const { name, train_metric: train } = l.metric;
  return (
    <div class="scroll">
      <table class="leaderboard">
        <thead>
          <tr>
            <th>run</th>
            <th>step</th>
            <th>checkpoint</th>
            <th data-column="eval">{name} (evaluated)</th>
            <th data-column="train">{train} at step</th>
            <th>rank</th>
            <th>job</th>
            <th>size</th>
            <th>created</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {l.checkpoints.map((c, i) => {
            const first = i === 0 || l.checkpoints[i - 1].run_id !== c.run_id;
            const cls = [c.id === selectedId ? 'selected' : '', first && i > 0 ? 'run-start' : ''].filter(Boolean).join(' ');
            return (
              <tr key={c.id} data-checkpoint={c.id} data-run={c.run_id} data-step={c.step ?? undefined} data-rank={rankOf.get(c.id)} class={cls || undefined}>
                <td>
                  <RunLink id={c.run_id} />
                </td>
                <td>{c.step ?? ''}</td>
                <td>
                  <a href={link(c.id)}>{c.id}</a> {c.id === bestId && <span class="badge best">best</span>}
                  {c.deleted_at && <span class="badge state-CANCELLED">deleted</span>} <StorageBadge c={c} />
                </td>
                <td data-column="eval">{metric(c.eval_value)}</td>
                <td data-column="train">{metric(c.train_value)}</td>
                <td>{rankOf.get(c.id) ?? ''}</td>
                <td>
                  <JobLink id={c.job_id} />
                  {c.attempt !== null && ` #${c.attempt}`}
                </td>
                <td>{bytes(c.size_bytes)}</td>
                <td>
                  <When at={c.created_at} />
                </td>
                <td>{!c.deleted_at && <EvaluateButton id={c.id} onDone={reload} />}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function ScopeForm({ q }: { q: CheckpointsQuery }) {
  function submit(e: Event) {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const s = (k: string) => String(f.get(k) ?? '').trim() || undefined;
    location.hash = s('run') ? href(['checkpoints'], { run: s('run') }) : href(['checkpoints'], { project: s('project'), experiment: s('experiment') });
  }
  return (
    <form class="filters" onSubmit={submit}>
      {/* Uncontrolled (keyed by the URL's value): a live refresh never overwrites what is being typed. */}
      <input key={`p:${q.project ?? ''}`} name="project" placeholder="project" defaultValue={q.project ?? ''} aria-label="project" />
      <input key={`e:${q.experiment ?? ''}`} name="experiment" placeholder="experiment" defaultValue={q.experiment ?? ''} aria-label="experiment" />
      <span class="muted">or</span>
      <input key={`r:${q.run ?? ''}`} name="run" placeholder="run id" defaultValue={q.run ?? ''} aria-label="run" />
      <button type="submit">Show</button>
    </form>
  );
}

export function CheckpointsPage({ query }: { query: URLSearchParams }) {
  const scope: CheckpointsQuery = {};
  for (const k of ['run', 'project', 'experiment'] as const) {
    const v = query.get(k);
    if (v) scope[k] = v;
  }
  const selectedId = query.get('id');
  const scoped = scope.run !== undefined || scope.project !== undefined;
  const key = JSON.stringify(scope);
  const list = useResource(() => (scoped ? api.checkpoints({ ...scope, limit: '1000' }) : Promise.resolve(null)), [key], { topics: ['checkpoints'] });
  const best = useResource(
    () => (scoped ? api.best(scope).catch((e: Error) => (e instanceof ApiError && e.status === 404 ? null : Promise.reject(e))) : Promise.resolve(null)),
    [key],
    { topics: ['checkpoints'] },
  );
  if (!scoped) {
    return (
      <>
        <h1>Checkpoints</h1>
        <ScopeForm q={scope} />
        <p class="muted">
          Choose a project (and experiment) or a run; the <a href="#/experiments">experiments</a> page links to each one's checkpoints.
        </p>
      </>
    );
  }
  const l = list.data;
  const board = l ? ranks(l) : null;
  const m = board?.metric;
  const bestId = best.data?.checkpoint.id;
  const link = (id: string) => href(['checkpoints'], { ...scope, id });
  return (
    <>
      <h1>Checkpoints</h1>
      <ScopeForm q={scope} />
      <ErrorBox error={list.error ?? best.error} />
      {!l || !board || !m ? (
        <Loading what="checkpoints" />
      ) : (
        <>
          <p class="metric" data-testid="primary-metric">
            Ranked by <strong>{m.name}</strong> ({m.goal === 'min' ? 'lower is better' : 'higher is better'}), from {LEVEL[m.level]}; beside it, {l.metric.train_metric} as the run logged it at the
            checkpoint's step: where the evaluated value turns up while the training one still falls, the model has begun to overfit.
            {best.data && (
              <>
                {' '}
                Best: <a href={link(best.data.checkpoint.id)}>{best.data.checkpoint.id}</a> = {metric(best.data.value)}
                {best.data.fallback ? ' (training-time value: no checkpoint has an evaluation of it)' : ' (evaluated)'}, of {best.data.ranked} ranked.
              </>
            )}
          </p>
          <Leaderboard l={l} rankOf={board.rankOf} selectedId={selectedId} bestId={bestId} link={link} reload={list.reload} />
          {l.checkpoints.length === 0 && <p class="muted">No checkpoints yet.</p>}
        </>
      )}
      {selectedId && <CheckpointDetail id={selectedId} onEvaluated={list.reload} />}
    </>
  );
}
