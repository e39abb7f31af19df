/**
 * One sweep (GET /sweeps/:id): its state and settings, its best trial (with the best checkpoint
 * of the trials' runs), the leaderboard in the API's order, every trial's curve of the sweep's
 * metric overlaid on one chart (each trial its colour, kept as the leaderboard reorders), and a
 * scatter of each trial's best value against each parameter.
 */
import { useAction, useWorkflowUrl } from '../actions.ts';
import { api } from '../api.ts';
import { MetricChart, type ChartRun } from '../charts/metric-chart.tsx';
import { ParamScatter } from '../charts/param-scatter.tsx';
import { listedValues, scatterAxis } from '../charts/scatter.ts';
import { ErrorBox, Loading, Section, StateBadge, WorkflowLink } from '../components.tsx';
import { useLive, useResource } from '../live.ts';
import { num, type SweepDetail } from '../types.ts';
import { BestTrial, Leaderboard, Settings } from './sweep-parts.tsx';
import { metricLabel } from './sweeps.tsx';

/** The parameters, in name order as the sweep takes them (docs/sweeps.md), from the file or else the trials. */
function paramNames(s: SweepDetail): string[] {
  const fromSpec = Object.keys((s.spec as { parameters?: Record<string, unknown> } | null)?.parameters ?? {});
  const names = fromSpec.length ? fromSpec : s.leaderboard.flatMap((t) => Object.keys(t.params));
  return [...new Set(names)].sort();
}

function Scatters({ s, params }: { s: SweepDetail; params: string[] }) {
  const scored = s.leaderboard.flatMap((t) => {
    const v = num(t.best?.value);
    return v !== null && Number.isFinite(v) ? [{ t, value: v }] : [];
  });
  if (scored.length === 0) return <p class="muted">No trial has a value of {s.metric.name} yet.</p>;
  return (
    <div class="scatters">
      {params.map((p) => (
        <ParamScatter
          key={p}
          param={p}
          metricName={s.metric.name}
          best={s.best?.trial ?? null}
          axis={scatterAxis(
            scored.filter(({ t }) => p in t.params).map(({ t, value }) => ({ trial: t.trial, param: t.params[p], value })),
            listedValues(s.spec, p),
          )}
        />
      ))}
    </div>
  );
}

export function SweepPage({ id }: { id: string }) {
  // Its own row and its trials' (a start, a stop at a rung, the end) are `sweeps` changes.
  const sweep = useResource(() => api.sweep(id), [id], { topics: ['jobs', 'runs', 'checkpoints', 'sweeps'] });
  const workflowUrl = useWorkflowUrl(`sweep/${id}`);
  const action = useAction(sweep.reload);
  const s = sweep.data;
  // New points of its trials' runs move the leaderboard's values (the chart follows them by itself);
  // the job list makes it a filter even before any trial has a run.
  const trials = s?.leaderboard ?? [];
  useLive({ topics: ['metrics'], runId: trials.flatMap((t) => (t.run_id ? [t.run_id] : [])), jobId: trials.map((t) => t.job_id) }, sweep.reload);
  if (!s) return sweep.error ? <ErrorBox error={sweep.error} /> : <Loading what={`sweep ${id}`} />;
  const params = paramNames(s);
  // The same cancel as gpuctl sweep cancel: the trials that have not ended are cancelled, and no more start.
  const cancel = () => action.run(() => api.cancelSweep(s.id));
  // In trial order, so that a trial keeps its line (and the chart its data) as the leaderboard reorders.
  const curves: ChartRun[] = [...s.leaderboard].sort((a, b) => a.trial - b.trial).flatMap((t) => (t.run_id ? [{ id: t.run_id, label: `trial ${t.trial}`, color: t.trial }] : []));
  return (
    <>
      <h1>
        Sweep {s.id} <StateBadge state={s.state} /> <span class="muted">{metricLabel(s.metric)}</span>
        <span class="actions">
          {s.state === 'RUNNING' && (
            <button class="danger" onClick={cancel} data-action="cancel-sweep">
              Cancel
            </button>
          )}
          <WorkflowLink url={workflowUrl} />
        </span>
      </h1>
      <ErrorBox error={action.error} />
      {s.reason && (
        <p class="muted" data-testid="sweep-reason">
          {s.reason}
        </p>
      )}
      <ErrorBox error={sweep.error} />
      <Settings s={s} />
      <Section title="Best trial">
        <BestTrial s={s} />
      </Section>
      <Section title="Leaderboard">
        <Leaderboard s={s} params={params} />
      </Section>
      <Section title={`${s.metric.name}, every trial`}>
        <div class="charts">{curves.length > 0 ? <MetricChart chartId={`sweep:${s.id}`} metricKey={s.metric.name} runs={curves} height={curves.length > 12 ? 320 : 260} /> : <p class="muted">No trial has a run yet.</p>}</div>
      </Section>
      <Section title={`${s.metric.name} by parameter`}>
        <Scatters s={s} params={params} />
      </Section>
    </>
  );
}
