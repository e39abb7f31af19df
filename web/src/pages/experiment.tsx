/**
 * An experiment: its runs overlaid on one chart per metric (each run, so each attempt of a job,
 * its own series), and a table of their params and tags. Without a project: the list of them.
 */
import { useEffect, useState } from 'preact/hooks';
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
  // Counted by the server over every run, not over the newest page of them.
  const groups = useResource(() => api.runCounts(), [], { topics: ['runs'] });
  if (!groups.data) return groups.error ? <ErrorBox error={groups.error} /> : <Loading what="experiments" />;
  return (
    <>
      <h1>Experiments</h1>
      {groups.data.length === 0 && <p class="muted">No runs yet.</p>}
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
          {groups.data.map((g) => (
            <tr key={`${g.project}/${g.experiment ?? ''}`} data-experiment={`${g.project}/${g.experiment ?? ''}`}>
              <td>
                <a href={href(['experiments'], { project: g.project, experiment: g.experiment ?? '' })}>
                  {g.project} / {g.experiment ?? ''}
                </a>
              </td>
              <td>{g.runs}</td>
              <td>{g.running}</td>
              <td>
                <When at={g.latest} />
              </td>
              <td>
                <a href={href(['checkpoints'], { project: g.project, experiment: g.experiment ?? undefined })}>checkpoints</a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/**
 * The runs overlaid, in the order they were chosen, each with the colour it got then: a run
 * that starts later is added (while fewer than MAX_OVERLAY are shown) without moving the others.
 */
interface Overlay {
  ids: string[];
  colors: Map<string, number>;
  /** Runs already offered: a run the user unticked is not added back when the list refreshes. */
  seen: Set<string>;
}

function freeColor(colors: Map<string, number>): number {
  const used = new Set(colors.values());
  let i = 0;
  while (used.has(i)) i++;
  return i;
}

/** `o` with the runs of `all` it has not seen added while there is room, and vanished ones dropped. */
function withRuns(o: Overlay | null, all: Run[]): Overlay {
  const next: Overlay = o ? { ids: [...o.ids], colors: new Map(o.colors), seen: new Set(o.seen) } : { ids: [], colors: new Map(), seen: new Set() };
  const present = new Set(all.map((r) => r.id));
  next.ids = next.ids.filter((id) => present.has(id));
  for (const id of next.colors.keys()) if (!present.has(id)) next.colors.delete(id);
  // Oldest first, so that the first load colours the runs in the order they started.
  for (const r of [...all].reverse()) {
    if (next.seen.has(r.id)) continue;
    next.seen.add(r.id);
    if (next.ids.length >= MAX_OVERLAY) continue;
    next.ids.push(r.id);
    next.colors.set(r.id, freeColor(next.colors));
  }
  return next;
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
  const [overlay, setOverlay] = useState<Overlay | null>(null);
  // Counts the refused ticks: each one re-renders, which unticks the box the browser ticked.
  const [full, setFull] = useState(0);
  useEffect(() => setOverlay(null), [project, experiment]);
  useEffect(() => {
    if (runs.data) setOverlay((o) => withRuns(o, runs.data!));
  }, [runs.data]);
  const all = runs.data ?? [];
  const byId = new Map(all.map((r) => [r.id, r]));
  const selected = (overlay?.ids ?? []).map((id) => byId.get(id)).filter((r): r is Run => r !== undefined);
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
  const chartRuns: ChartRun[] = selected.map((r) => ({ id: r.id, label: runLabel(r), color: overlay?.colors.get(r.id) }));
  const last = new Map((summaries.data ?? []).map((r) => [r.run_id, r.summaries]));
  const params = paramColumns(all);
  const toggle = (id: string) => {
    if (!overlay) return;
    const next: Overlay = { ids: [...overlay.ids], colors: new Map(overlay.colors), seen: overlay.seen };
    if (next.ids.includes(id)) {
      next.ids = next.ids.filter((x) => x !== id);
      next.colors.delete(id);
    } else if (next.ids.length >= MAX_OVERLAY) {
      setFull((n) => n + 1);
      return;
    } else {
      next.ids.push(id);
      next.colors.set(id, freeColor(next.colors));
    }
    setFull(0);
    setOverlay(next);
  };
  return (
    <>
      <h1>
        {project} / {experiment || 'all experiments'}
      </h1>
      <p class="muted">
        {all.length} runs, {selected.length} overlaid · <a href={href(['checkpoints'], { project, experiment: experiment || undefined })}>checkpoints</a>
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
              const color = overlay?.ids.includes(r.id) ? overlay.colors.get(r.id) : undefined;
              return (
                <tr key={r.id} data-run={r.id}>
                  <td>
                    <input type="checkbox" checked={color !== undefined} onChange={() => toggle(r.id)} aria-label={`overlay ${r.id}`} />
                    {color !== undefined && <span class="swatch" style={{ background: colorOf(color) }} />}
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
