/**
 * An experiment: its runs overlaid on one chart per metric (each run, so each attempt of a job,
 * its own series; its checkpoints' evaluations as marks beside the training metric they belong
 * to), and a table of their params and tags. The runs of evaluations are hidden until asked for,
 * then listed under the checkpoint they evaluate. Without a project: the list of experiments.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { MetricChart, type ChartRun } from '../charts/metric-chart.tsx';
import { ErrorBox, Loading, Section } from '../components.tsx';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import { isSystemKey } from '../system-metrics.ts';
import type { Run, RunMetrics } from '../types.ts';
import { ExperimentIndex } from './experiment-index.tsx';
import { MAX_OVERLAY, toggled, withRuns, without, type Overlay } from './experiment-overlay.ts';
import { grouped, paramColumns, RunsTable } from './experiment-runs.tsx';
import { runLabel } from './run.tsx';

const DEFAULT_CHARTS = 4;
const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/**
 * The metrics to chart: those the runs log, the ones with evaluations drawn beside them first and
 * the agent's system/… telemetry last (the default charts are the user's metrics); then each
 * evaluated metric whose training counterpart no run logs (a chart of its own, titled by its label).
 */
function chartKeys(metrics: RunMetrics[]): { keys: string[]; own: Map<string, string> } {
  const logged = new Set(metrics.flatMap((r) => Object.keys(r.summaries)));
  const evals = metrics.flatMap((r) => r.evaluations);
  const beside = new Set(evals.map((e) => e.train_key));
  const own = new Map(evals.filter((e) => !logged.has(e.key) && !logged.has(e.train_key)).map((e) => [e.key, e.label]));
  const keys = [...logged].sort((a, b) => Number(isSystemKey(a)) - Number(isSystemKey(b)) || Number(beside.has(b)) - Number(beside.has(a)) || a.localeCompare(b));
  return { keys: [...keys, ...[...own.keys()].sort()], own };
}

export function ExperimentPage({ query }: { query: URLSearchParams }) {
  const project = query.get('project') ?? '';
  const experiment = query.get('experiment') ?? '';
  const wanted = query.get('keys');
  const runs = useResource(() => (project ? api.runs({ project, experiment: experiment || undefined, limit: '1000' }) : Promise.resolve([])), [project, experiment], { topics: ['runs'] });
  const [overlay, setOverlay] = useState<Overlay | null>(null);
  const [showEvals, setShowEvals] = useState(false);
  // Counts the refused ticks: each one re-renders, which unticks the box the browser ticked.
  const [full, setFull] = useState(0);
  useEffect(() => {
    setOverlay(null);
    setShowEvals(false);
  }, [project, experiment]);
  useEffect(() => {
    if (runs.data) setOverlay((o) => withRuns(o, runs.data!));
  }, [runs.data]);
  const all = runs.data ?? [];
  const byId = new Map(all.map((r) => [r.id, r]));
  const evalRuns = all.filter((r) => r.evaluates);
  const selected = (overlay?.ids ?? []).map((id) => byId.get(id)).filter((r): r is Run => r !== undefined && (showEvals || !r.evaluates));
  const ids = selected.map((r) => r.id).join(',');
  // One call for every run's summaries (the metric keys, the last value of each) and evaluations.
  const summaries = useResource(
    () => (ids ? api.compare({ runs: ids, points: '1' }) : Promise.resolve([] as RunMetrics[])),
    [ids],
    { topics: ['runs', 'metrics', 'checkpoints'], runId: selected.map((r) => r.id) },
  );
  if (!project) return <ExperimentIndex />;
  if (!runs.data) return runs.error ? <ErrorBox error={runs.error} /> : <Loading what="runs" />;
  const { keys, own } = chartKeys(summaries.data ?? []);
  const shownKeys = wanted ? wanted.split(',').filter(Boolean) : keys.slice(0, DEFAULT_CHARTS);
  const setKeys = (k: string[]) => (location.hash = href(['experiments'], { project, experiment, keys: k.join(',') }));
  const chartRuns: ChartRun[] = selected.map((r) => ({ id: r.id, label: runLabel(r), color: overlay?.colors.get(r.id) }));
  const last = new Map((summaries.data ?? []).map((r) => [r.run_id, r.summaries]));
  const toggle = (id: string) => {
    if (!overlay) return;
    const next = toggled(overlay, id);
    if (!next) return setFull((n) => n + 1);
    setFull(0);
    setOverlay(next);
  };
  const setEvalsShown = (on: boolean) => {
    setShowEvals(on);
    // Hidden again: the evaluation runs ticked meanwhile leave the charts (and free their places).
    if (!on && overlay) setOverlay(without(overlay, (id) => byId.get(id)?.evaluates != null));
  };
  return (
    <>
      <h1>
        {project} / {experiment || 'all experiments'}
      </h1>
      <p class="muted">
        {count(all.length - evalRuns.length, 'run')}, {selected.length} overlaid
        {evalRuns.length > 0 && <>, and {count(evalRuns.length, 'evaluation run')}{showEvals ? '' : ' (hidden)'}</>} ·{' '}
        <a href={href(['checkpoints'], { project, experiment: experiment || undefined })}>checkpoints</a>
      </p>
      {full > 0 && (
        <p class="error" data-testid="overlay-full">
          At most {MAX_OVERLAY} runs can be overlaid at once: untick one to show another.
        </p>
      )}
      <ErrorBox error={summaries.error} />
      {keys.length > 0 && (
        <p class="keys">
          {keys.map((k) => (
            <label key={k} class="toggle">
              <input type="checkbox" checked={shownKeys.includes(k)} onChange={() => setKeys(shownKeys.includes(k) ? shownKeys.filter((x) => x !== k) : [...shownKeys, k])} /> {own.get(k) ?? k}
            </label>
          ))}
        </p>
      )}
      <div class="charts">
        {ids &&
          shownKeys.map((k) => (
            <MetricChart key={k} chartId={k} metricKey={k} title={own.get(k)} marksOnly={own.has(k)} runs={chartRuns} height={chartRuns.length > 12 ? 320 : 260} />
          ))}
      </div>
      <Section
        title="Runs"
        actions={
          evalRuns.length > 0 && (
            <label class="toggle">
              <input type="checkbox" checked={showEvals} onChange={() => setEvalsShown(!showEvals)} data-action="show-evaluations" /> show evaluation runs ({evalRuns.length})
            </label>
          )
        }
      >
        <RunsTable
          rows={grouped(all, showEvals)}
          params={paramColumns(all.filter((r) => !r.evaluates))}
          lastOf={shownKeys.filter((k) => !own.has(k)).slice(0, 2)}
          last={last}
          colorOf={(id) => (overlay?.ids.includes(id) ? overlay.colors.get(id) : undefined)}
          toggle={toggle}
        />
      </Section>
    </>
  );
}
