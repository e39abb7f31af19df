/**
 * One metric of one or more runs, drawn with uPlot. It only ever asks for about as many
 * buckets per run as the plot is wide (`points=`), so 50 runs of 100k points cost what 50 × 1000
 * do; dragging across the plot zooms and fetches finer buckets for that range (`step_min`,
 * `step_max`), double-click goes back to the whole run.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { useLive } from '../live.ts';
import { ChartController, type ChartRun } from './chart-controller.ts';

export { colorOf, type ChartRun, type ChartState } from './chart-controller.ts';

export function MetricChart({ chartId, metricKey, runs, height = 260 }: { chartId: string; metricKey: string; runs: ChartRun[]; height?: number }) {
  const el = useRef<HTMLDivElement>(null);
  const ctl = useRef<ChartController | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const runKey = runs.map((r) => `${r.id}:${r.color ?? ''}:${r.label}`).join(',');
  const latestRuns = useRef(runs);
  latestRuns.current = runs;
  useEffect(() => {
    const c = new ChartController(el.current!, chartId, metricKey, latestRuns.current, height, setError);
    ctl.current = c;
    void c.load();
    const ro = new ResizeObserver(() => c.resize());
    ro.observe(el.current!);
    return () => {
      ro.disconnect();
      c.destroy();
      ctl.current = null;
    };
  }, [chartId, metricKey, height]);
  // Runs added or removed: the same controller redraws, fetching only the added ones.
  const shownKey = useRef(runKey);
  useEffect(() => {
    if (shownKey.current === runKey) return;
    shownKey.current = runKey;
    ctl.current?.setRuns(latestRuns.current);
  }, [runKey]);
  useLive({ topics: ['metrics'], runId: runs.map((r) => r.id) }, () => ctl.current?.refresh());
  return (
    <figure class="chart">
      <figcaption>
        <strong>{metricKey}</strong> <span class="muted">drag to zoom · double-click for the whole run</span>
        {error && <span class="error"> {error.message}</span>}
      </figcaption>
      <div ref={el} class="plot" data-chart={chartId} data-key={metricKey} />
    </figure>
  );
}
