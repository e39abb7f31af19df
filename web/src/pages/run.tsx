/**
 * One run: its metric charts (with every attempt of its job overlaid on demand, and a fork's
 * parent run up to the fork's step; its checkpoints' evaluations drawn beside the training metric
 * they belong to), the agent's telemetry of its cards on a System panel of their own, its
 * evaluated checkpoints, params, tags, its Python environment, artifacts and events.
 */
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { MetricChart, type ChartRun } from '../charts/metric-chart.tsx';
import { ErrorBox, EventList, JobLink, KeyValues, Loading, RunLink, Section, StateBadge, When } from '../components.tsx';
import { metric } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import { splitSystemKeys } from '../system-metrics.ts';
import type { Run, Summary } from '../types.ts';
import { RunArtifacts } from './run-artifacts.tsx';
import { RunCode, RunImage } from './run-code.tsx';
import { RunPythonEnv } from './run-python-env.tsx';
import { EvaluatedCheckpoints, Evaluates } from './run-evaluations.tsx';
import { SystemPanel } from './run-system.tsx';

export const runLabel = (r: Run) => `${r.name ?? r.id}${r.attempt !== null && !(r.name ?? '').endsWith(`#${r.attempt}`) ? ` #${r.attempt}` : ''}`;

function Summaries({ metrics, keys: only, empty = 'no metrics yet' }: { metrics: Record<string, Summary>; keys?: string[]; empty?: string }) {
  const keys = (only ?? Object.keys(metrics)).slice().sort();
  if (keys.length === 0) return <p class="muted">{empty}</p>;
  return (
    <table class="summaries">
      <thead>
        <tr>
          <th>metric</th>
          <th>points</th>
          <th>steps</th>
          <th>last</th>
          <th>min (step)</th>
          <th>max (step)</th>
          <th>NaN</th>
        </tr>
      </thead>
      <tbody>
        {keys.map((k) => {
          const s = metrics[k];
          return (
            <tr key={k}>
              <td>
                <code>{k}</code>
              </td>
              <td>{s.count}</td>
              <td>
                {s.first_step}–{s.last_step}
              </td>
              <td>{metric(s.last)}</td>
              <td>
                {metric(s.min)} ({s.min_step ?? ''})
              </td>
              <td>
                {metric(s.max)} ({s.max_step ?? ''})
              </td>
              <td>{s.nan_count || ''}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

export function RunPage({ id }: { id: string }) {
  const run = useResource(() => api.run(id), [id], { topics: ['runs', 'metrics'], runId: id });
  const events = useResource(() => api.runEvents(id), [id], { topics: ['events'], runId: id });
  const jobId = run.data?.job_id ?? null;
  const siblings = useResource(() => (jobId ? api.runs({ job: jobId }) : Promise.resolve([])), [jobId], { topics: ['runs'] });
  // The run's evaluation series (one bucket of each metric is all this needs): which charts they go on.
  const evals = useResource(() => api.metrics(id, { points: '1' }).then((m) => m.evaluations), [id], { topics: ['checkpoints'] });
  const [overlay, setOverlay] = useState(false);
  const fork = run.data?.forked_from ?? null;
  const [showParent, setShowParent] = useState(false);
  // The parent's name for the legend, once asked for: a parent the token may not read keeps its id.
  const parent = useResource(() => (fork && showParent ? api.run(fork.run_id).catch(() => null) : Promise.resolve(null)), [fork?.run_id, showParent], { topics: [] });
  const r = run.data;
  if (!r) return run.error ? <ErrorBox error={run.error} /> : <Loading what={`run ${id}`} />;
  const attempts = (siblings.data ?? []).slice().sort((a, b) => (a.attempt ?? 0) - (b.attempt ?? 0));
  const own: ChartRun[] = overlay && attempts.length > 1 ? attempts.map((x) => ({ id: x.id, label: runLabel(x) })) : [{ id: r.id, label: runLabel(r) }];
  // A fork's parent, drawn grey and dashed up to the step the fork branched at (its direct parent only).
  const forkStep = fork?.step ?? null;
  const parentLine: ChartRun | null =
    fork && forkStep !== null && showParent ? { id: fork.run_id, label: `${parent.data ? runLabel(parent.data) : fork.run_id} (parent, to step ${forkStep})`, upTo: forkStep, ghost: true } : null;
  const chartRuns = parentLine ? [...own, parentLine] : own;
  const logged = Object.keys(r.metrics);
  // The agent's system/… series go on the System panel, not among the training curves.
  const { training, system } = splitSystemKeys(logged);
  const ev = evals.data ?? [];
  // The charts with evaluations drawn on them first: the train curve and the eval curve together.
  const beside = new Set(ev.map((e) => e.train_key));
  const keys = training.sort((a, b) => Number(beside.has(b)) - Number(beside.has(a)) || a.localeCompare(b));
  // An evaluated metric whose training counterpart the run does not log: a chart of its own.
  const evalOnly = ev.filter((e) => !logged.includes(e.key) && !logged.includes(e.train_key));
  return (
    <>
      <h1>
        {runLabel(r)} <StateBadge state={r.status} />
      </h1>
      <p class="muted">
        {r.id} · {r.source} run
        {r.project && (
          <>
            {' '}
            in <a href={href(['experiments'], { project: r.project, experiment: r.experiment ?? undefined })}>{`${r.project}/${r.experiment}`}</a>
          </>
        )}
        {r.job_id && (
          <>
            {' '}
            · job <JobLink id={r.job_id} /> attempt {r.attempt}
          </>
        )}{' '}
        · started <When at={r.started_at} /> {r.ended_at && <>· ended <When at={r.ended_at} /></>} ·{' '}
        <a href={href(['checkpoints'], { run: r.id })}>checkpoints</a>
      </p>
      {r.evaluates && <Evaluates e={r.evaluates} />}
      <RunCode tags={r.system_tags} />
      <RunImage tags={r.system_tags} />
      {fork && (
        <p data-testid="forked-from">
          Forked from checkpoint <a href={href(['checkpoints'], { run: fork.run_id, id: fork.checkpoint_id })}>{fork.checkpoint_id}</a> of run <RunLink id={fork.run_id} /> at step {fork.step ?? '?'}.
        </p>
      )}
      <Section
        title="Metrics"
        actions={
          <>
            {attempts.length > 1 && (
              <label class="toggle">
                <input type="checkbox" checked={overlay} onChange={() => setOverlay(!overlay)} /> overlay all {attempts.length} attempts of the job
              </label>
            )}
            {fork && forkStep !== null && (
              <label class="toggle">
                <input type="checkbox" data-action="show-parent" checked={showParent} onChange={() => setShowParent(!showParent)} /> show parent run up to step {forkStep}
              </label>
            )}
          </>
        }
      >
        <div class="charts">
          {keys.map((k) => (
            <MetricChart key={k} chartId={k} metricKey={k} runs={chartRuns} />
          ))}
          {evalOnly.map((e) => (
            <MetricChart key={e.key} chartId={e.key} metricKey={e.key} title={e.label} runs={chartRuns} marksOnly />
          ))}
        </div>
        <Summaries metrics={r.metrics} keys={training} empty={system.length ? "no metrics logged by the run yet (the agent's are under System)" : undefined} />
      </Section>
      <SystemPanel runId={r.id} charts={system} summaries={r.metrics}>
        <details>
          <summary>every system series</summary>
          <Summaries metrics={r.metrics} keys={system.flatMap((c) => c.lines.map((l) => l.key))} />
        </details>
      </SystemPanel>
      {!r.evaluates && <EvaluatedCheckpoints runId={r.id} summaries={r.metrics} />}
      <div class="columns">
        <Section title="Params">
          <KeyValues data={r.params} />
        </Section>
        <Section title="Tags">
          <KeyValues data={{ ...r.tags }} empty="no tags" />
          {Object.keys(r.system_tags).length > 0 && <KeyValues data={r.system_tags} />}
        </Section>
      </div>
      {events.data && <RunPythonEnv key={r.id} events={events.data} />}
      <RunArtifacts key={r.id} run={r} />
      <Section title="Events">{events.data ? <EventList events={events.data} /> : <Loading what="events" />}</Section>
    </>
  );
}
