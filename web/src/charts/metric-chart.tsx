/**
 * One metric of one or more runs, drawn with uPlot. It only ever asks for about as many
 * buckets per run as the plot is wide (`points=`), so 50 runs of 100k points cost what 50 × 1000
 * do; dragging across the plot zooms and fetches finer buckets for that range (`step_min`,
 * `step_max`), double-click goes back to the whole run. A run's evaluations of the metric it
 * belongs beside (eval/loss on train/loss) are drawn as marks at their checkpoints' steps, and
 * listed in a table for screen readers. The y axis leaves outliers out unless asked (a run that
 * diverged to 1e5 would flatten the others), and can be logarithmic.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { metric } from '../format.ts';
import { useLive } from '../live.ts';
import { ChartController } from './chart-controller.ts';
import type { ChartRun, DrawnMarks } from './chart-state.ts';
import { DEFAULT_Y_SCALE, type YScale } from './y-scale.ts';

export type { ChartRun, ChartState } from './chart-state.ts';
export { colorOf } from './plot-options.ts';

interface Props {
  chartId: string;
  metricKey: string;
  runs: ChartRun[];
  height?: number;
  /** The caption; the metric key unless given. */
  title?: string;
  /** Only the runs' evaluations of `metricKey`: an evaluated metric whose training counterpart they do not log. */
  marksOnly?: boolean;
}

/** The marks as a table: what the plot shows, for those who cannot see it (and for tests). */
function MarksTable({ title, marks }: { title: string; marks: DrawnMarks[] }) {
  if (marks.length === 0) return null;
  return (
    <table class="visually-hidden" data-marks-table>
      <caption>{title}: evaluations at checkpoints</caption>
      <thead>
        <tr>
          <th>series</th>
          <th>step</th>
          <th>value</th>
          <th>checkpoint</th>
        </tr>
      </thead>
      <tbody>
        {marks.flatMap((m) =>
          m.x.map((step, i) => (
            <tr key={`${m.label}:${m.checkpoints[i]}`} data-series={m.label} data-step={step}>
              <td>{m.label}</td>
              <td>{step}</td>
              <td>{m.y[i] === null ? 'not finite' : metric(m.y[i])}</td>
              <td>{m.checkpoints[i]}</td>
            </tr>
          )),
        )}
      </tbody>
    </table>
  );
}

export function MetricChart({ chartId, metricKey, runs, height = 260, title = metricKey, marksOnly = false }: Props) {
  const el = useRef<HTMLDivElement>(null);
  const ctl = useRef<ChartController | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [marks, setMarks] = useState<DrawnMarks[]>([]);
  const shownMarks = useRef('');
  const runKey = runs.map((r) => `${r.id}:${r.key ?? ''}:${r.color ?? ''}:${r.label}:${r.upTo ?? ''}:${r.ghost ? 1 : 0}`).join(',');
  const latestRuns = useRef(runs);
  latestRuns.current = runs;
  const [yScale, setYScale] = useState<YScale>(DEFAULT_Y_SCALE);
  const latestScale = useRef(yScale);
  latestScale.current = yScale;
  useEffect(() => {
    const onMarks = (m: DrawnMarks[]) => {
      // Most draws bring the same marks: only a change re-renders the table.
      const key = JSON.stringify(m);
      if (key === shownMarks.current) return;
      shownMarks.current = key;
      setMarks(m);
    };
    const c = new ChartController(el.current!, chartId, metricKey, latestRuns.current, { height, marksOnly, onError: setError, onMarks });
    c.yScale = latestScale.current;
    ctl.current = c;
    void c.load();
    const ro = new ResizeObserver(() => c.resize());
    ro.observe(el.current!);
    return () => {
      ro.disconnect();
      c.destroy();
      ctl.current = null;
    };
  }, [chartId, metricKey, height, marksOnly]);
  // Runs added or removed: the same controller redraws, fetching only the added ones.
  const shownKey = useRef(runKey);
  useEffect(() => {
    if (shownKey.current === runKey) return;
    shownKey.current = runKey;
    ctl.current?.setRuns(latestRuns.current);
  }, [runKey]);
  useEffect(() => {
    if (ctl.current && ctl.current.yScale !== yScale) ctl.current.setYScale(yScale);
  }, [yScale]);
  // New points, or a checkpoint evaluated (its mark appears): fetch again.
  useLive({ topics: ['metrics', 'checkpoints'], runId: [...new Set(runs.map((r) => r.id))] }, () => ctl.current?.refresh());
  return (
    <figure class="chart">
      <figcaption>
        <strong>{title}</strong> <span class="muted">drag to zoom · double-click for the whole run</span>
        {error && <span class="error"> {error.message}</span>}
        <span class="chart-scale">
          <label class="toggle" title="leave values far outside the others (a diverged run) out of the y axis's range">
            <input type="checkbox" data-action="ignore-outliers" checked={yScale.ignoreOutliers} onChange={() => setYScale({ ...yScale, ignoreOutliers: !yScale.ignoreOutliers })} /> ignore outliers
          </label>
          <label class="toggle" title="a logarithmic y axis (values ≤ 0 are not drawn)">
            <input type="checkbox" data-action="log-scale" checked={yScale.log} onChange={() => setYScale({ ...yScale, log: !yScale.log })} /> log scale
          </label>
        </span>
      </figcaption>
      <div ref={el} class="plot" data-chart={chartId} data-key={metricKey} />
      <MarksTable title={title} marks={marks} />
    </figure>
  );
}
