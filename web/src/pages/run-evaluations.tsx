/**
 * The evaluation story on a run's page: for a training run, its evaluated checkpoints (step,
 * checkpoint, the evaluated metrics, the training metric at that step) and where the evaluated
 * best and the training best fall; for the run of an evaluation, what it evaluates.
 */
import { rankCheckpoints } from '../../../domain/best-checkpoint.ts';
import { api } from '../api.ts';
import { ErrorBox, RunLink, Section } from '../components.tsx';
import { metric } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import type { ListedCheckpoint, ResolvedMetric, Run, Summary } from '../types.ts';

const checkpointLink = (runId: string, id: string) => href(['checkpoints'], { run: runId, id });

/** "Evaluates checkpoint ckpt-… at step 30 of run …": the run of an EVALUATE job. */
export function Evaluates({ e }: { e: NonNullable<Run['evaluates']> }) {
  return (
    <p class="evaluates" data-testid="evaluates">
      Evaluates checkpoint <a href={checkpointLink(e.run_id, e.checkpoint_id)}>{e.checkpoint_id}</a>
      {e.step !== null && <> at step {e.step}</>} of run <RunLink id={e.run_id} />; its metrics are drawn on that run's charts at the checkpoint's step.
    </p>
  );
}

/** The evaluated checkpoint ranked first on `m`, as GET /checkpoints/best ranks (ties to the later step). */
function bestEvaluated(rows: ListedCheckpoint[], m: ResolvedMetric): ListedCheckpoint | null {
  const candidates = rows.map((c) => ({ c, id: c.id, step: c.step, createdAt: new Date(c.created_at), evalMetrics: c.eval_metrics, trainMetrics: null }));
  return rankCheckpoints(candidates, m).ranked[0]?.checkpoint.c ?? null;
}

/** A training run's evaluated checkpoints, by step. */
export function EvaluatedCheckpoints({ runId, summaries }: { runId: string; summaries: Record<string, Summary> }) {
  const list = useResource(() => api.checkpoints({ run: runId, limit: '1000' }), [runId], { topics: ['checkpoints'] });
  const l = list.data;
  if (!l) return <ErrorBox error={list.error} />;
  if (l.checkpoints.length === 0) return null;
  const m = l.metric;
  const rows = l.checkpoints.filter((c) => c.eval_metrics !== null).sort((a, b) => (a.step ?? Infinity) - (b.step ?? Infinity));
  const keys = [...new Set(rows.flatMap((c) => Object.keys(c.eval_metrics ?? {})))].sort((a, b) => Number(b === m.name) - Number(a === m.name) || a.localeCompare(b));
  const best = bestEvaluated(rows, m);
  const train = summaries[m.train_metric];
  const trainBestStep = train ? (m.goal === 'min' ? train.min_step : train.max_step) : null;
  return (
    <Section title="Evaluated checkpoints">
      {rows.length === 0 ? (
        <p class="muted">
          {l.checkpoints.length} checkpoints, none evaluated yet: <a href={href(['checkpoints'], { run: runId })}>evaluate one</a>.
        </p>
      ) : (
        <>
          {best && (
            <p data-testid="eval-story">
              Evaluated best: step {best.step ?? '?'} ({m.name} {metric(best.eval_value)}, {m.goal === 'min' ? 'lowest' : 'highest'} of {rows.length})
              {trainBestStep !== null && trainBestStep !== undefined && (
                <>
                  {' '}
                  · training best: step {trainBestStep} ({m.train_metric} {metric(m.goal === 'min' ? train!.min : train!.max)})
                </>
              )}
              .
            </p>
          )}
          <table class="evaluated">
            <thead>
              <tr>
                <th>step</th>
                <th>checkpoint</th>
                {keys.map((k) => (
                  <th key={k}>{k} (evaluated)</th>
                ))}
                <th>{m.train_metric} at step</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((c) => (
                <tr key={c.id} data-checkpoint={c.id} data-step={c.step ?? undefined}>
                  <td>{c.step ?? ''}</td>
                  <td>
                    <a href={checkpointLink(runId, c.id)}>{c.id}</a> {c.id === best?.id && <span class="badge best">best evaluated</span>}
                  </td>
                  {keys.map((k) => (
                    <td key={k}>{metric(c.eval_metrics?.[k] ?? null)}</td>
                  ))}
                  <td>{metric(c.train_value)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </Section>
  );
}
