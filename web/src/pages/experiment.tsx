/**
 * An experiment: its runs overlaid on one chart per metric (each run, so each attempt of a job,
 * its own series), and a table of their params and tags. Without a project: the list of them.
 */
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { colorOf, MetricChart, type ChartRun } from '../charts/metric-chart.tsx';
import { ErrorBox, JobLink, Loading, RunLink, Section, StateBadge, When } from '../components.tsx';
import { metric, show } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import type { Run, RunMetrics } from '../types.ts';
import { runLabel } from './run.tsx';

/** The compare route takes at most this many runs; the chart overlays as many. */
const MAX_OVERLAY = 50;
const DEFAULT_CHARTS = 4;

function ExperimentIndex() {
  const runs = useResource(() => api.runs({ limit: '1000' }), [], { topics: ['runs'] });
  if (!runs.data) return runs.error ? <ErrorBox error={runs.error} /> : <Loading what="runs" />;
  const groups = new Map<string, { project: string; experiment: string; runs: Run[] }>();
  for (const r of runs.data) {
    if (!r.project) continue;
    const k = `${r.project}/${r.experiment ?? ''}`;
    const g = groups.get(k) ?? { project: r.project, experiment: r.experiment ?? '', runs: [] };
    g.runs.push(r);
    groups.set(k, g);
  }
  return (
    <>
      <h1>Experiments</h1>
      {groups.size === 0 && <p class="muted">No runs yet.</p>}
      <table>
        <thead>
          <tr>
            <th>project / experiment</th>
            <th>runs</th>
            <th>running</th>
            <th>latest</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {[...groups.values()].map((g) => (
            <tr key={`${g.project}/${g.experiment}`}>
              <td>
                <a href={href(['experiments'], { project: g.project, experiment: g.experiment })}>
                  {g.project} / {g.experiment}
                </a>
              </td>
              <td>{g.runs.length}</td>
              <td>{g.runs.filter((r) => r.status === 'running').length}</td>
              <td>
                <When at={g.runs[0].created_at} />
              </td>
              <td>
                <a href={href(['checkpoints'], { project: g.project, experiment: g.experiment })}>checkpoints</a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** Params whose values differ between the runs first: they are what the runs compare. */
function paramColumns(runs: Run[]): string[] {
  const keys = new Set<string>();
  for (const r of runs) for (const k of Object.keys(r.params)) keys.add(k);
  const differs = (k: string) => new Set(runs.map((r) => show(r.params[k]))).size > 1;
  return [...keys].sort((a, b) => Number(differs(b)) - Number(differs(a)) || a.localeCompare(b)).slice(0, 8);
}

export function ExperimentPage({ query }: { query: URLSearchParams }) {
  const project = query.get('project') ?? '';
  const experiment = query.get('experiment') ?? '';
  const wanted = query.get('keys');
  const runs = useResource(() => (project ? api.runs({ project, experiment: experiment || undefined, limit: '1000' }) : Promise.resolve([])), [project, experiment], { topics: ['runs'] });
  const [unselected, setUnselected] = useState<Set<string>>(new Set());
  const all = runs.data ?? [];
  const selected = all.filter((r) => !unselected.has(r.id)).slice(0, MAX_OVERLAY);
  const ids = selected.map((r) => r.id).join(',');
  // One call for every run's summaries: the metric keys, and the last value of each.
  const summaries = useResource(
    () => (ids ? api.compare({ runs: ids, points: '1' }) : Promise.resolve([] as RunMetrics[])),
    [ids],
    { topics: ['runs', 'metrics'], runId: selected.map((r) => r.id) },
  );
  if (!project) return <ExperimentIndex />;
  if (!runs.data) return runs.error ? <ErrorBox error={runs.error} /> : <Loading what="runs" />;
  const keys = [...new Set((summaries.data ?? []).flatMap((r) => Object.keys(r.summaries)))].sort();
  const shownKeys = wanted ? wanted.split(',').filter(Boolean) : keys.slice(0, DEFAULT_CHARTS);
  const setKeys = (k: string[]) => (location.hash = href(['experiments'], { project, experiment, keys: k.join(',') }));
  const chartRuns: ChartRun[] = selected.map((r) => ({ id: r.id, label: runLabel(r) }));
  const last = new Map((summaries.data ?? []).map((r) => [r.run_id, r.summaries]));
  const params = paramColumns(all);
  const toggle = (id: string) => {
    const next = new Set(unselected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setUnselected(next);
  };
  return (
    <>
      <h1>
        {project} / {experiment || 'all experiments'}
      </h1>
      <p class="muted">
        {all.length} runs, {selected.length} overlaid · <a href={href(['checkpoints'], { project, experiment: experiment || undefined })}>checkpoints</a>
      </p>
      <ErrorBox error={summaries.error} />
      {keys.length > 0 && (
        <p class="keys">
          {keys.map((k) => (
            <label key={k} class="toggle">
              <input type="checkbox" checked={shownKeys.includes(k)} onChange={() => setKeys(shownKeys.includes(k) ? shownKeys.filter((x) => x !== k) : [...shownKeys, k])} /> {k}
            </label>
          ))}
        </p>
      )}
      <div class="charts">
        {ids &&
          shownKeys.map((k) => (
            <MetricChart key={k} chartId={k} metricKey={k} runs={chartRuns} height={chartRuns.length > 12 ? 320 : 260} />
          ))}
      </div>
      <Section title="Runs">
        <div class="scroll">
        <table class="runs">
          <thead>
            <tr>
              <th />
              <th>run</th>
              <th>status</th>
              <th>job</th>
              {params.map((p) => (
                <th key={p}>{p}</th>
              ))}
              {shownKeys.slice(0, 2).map((k) => (
                <th key={k}>last {k}</th>
              ))}
              <th>tags</th>
              <th>started</th>
            </tr>
          </thead>
          <tbody>
            {all.map((r) => {
              const i = selected.findIndex((s) => s.id === r.id);
              return (
                <tr key={r.id} data-run={r.id}>
                  <td>
                    <input type="checkbox" checked={i >= 0} onChange={() => toggle(r.id)} aria-label={`overlay ${r.id}`} />
                    {i >= 0 && <span class="swatch" style={{ background: colorOf(i) }} />}
                  </td>
                  <td>
                    <RunLink id={r.id} label={runLabel(r)} />
                  </td>
                  <td>
                    <StateBadge state={r.status} />
                  </td>
                  <td>
                    <JobLink id={r.job_id} />
                  </td>
                  {params.map((p) => (
                    <td key={p}>{r.params[p] === undefined ? '' : show(r.params[p])}</td>
                  ))}
                  {shownKeys.slice(0, 2).map((k) => (
                    <td key={k}>{metric(last.get(r.id)?.[k]?.last)}</td>
                  ))}
                  <td>
                    {Object.entries(r.tags).map(([k, v]) => (
                      <span key={k} class="label">
                        {k}={v}
                      </span>
                    ))}
                  </td>
                  <td>
                    <When at={r.started_at} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        </div>
      </Section>
    </>
  );
}
