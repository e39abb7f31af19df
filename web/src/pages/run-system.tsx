/**
 * The run page's System panel: the agent's telemetry of the run's cards and process group
 * (system-metrics.ts groups the keys), one chart per quantity with a line per card, below the
 * training curves. A chart whose series hold no finite value is left out, and a run without any
 * shows no panel. A short run (a sample or none per series: one telemetry tick) has its panel
 * folded, saying so: seven charts of a dot each would take most of the page.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { MetricChart } from '../charts/metric-chart.tsx';
import { Section } from '../components.tsx';
import type { SystemChart } from '../system-metrics.ts';
import type { Summary } from '../types.ts';

/** Whether a series' summary counts a finite value (NaN and ±Infinity draw nothing). */
const finite = (s: Summary | undefined) => s !== undefined && s.count > s.nan_count && s.min !== null && Number.isFinite(Number(s.min));

/** The charts with something to draw, and whether every series they draw has at most one sample. */
export function systemCharts(charts: SystemChart[], summaries: Record<string, Summary>): { shown: SystemChart[]; short: boolean } {
  const shown = charts.filter((c) => c.lines.some((l) => finite(summaries[l.key])));
  const short = shown.every((c) => c.lines.every((l) => (summaries[l.key]?.count ?? 0) <= 1));
  return { shown, short };
}

export function SystemPanel({ runId, charts, summaries, children }: { runId: string; charts: SystemChart[]; summaries: Record<string, Summary>; children?: ComponentChildren }) {
  // null: as the data says (folded for a short run); a click decides from then on.
  const [opened, setOpened] = useState<boolean | null>(null);
  const { shown, short } = systemCharts(charts, summaries);
  if (shown.length === 0) return null;
  const open = opened ?? !short;
  const n = `${shown.length} chart${shown.length === 1 ? '' : 's'}`;
  return (
    <Section title="System">
      <details
        open={open}
        data-system-fold
        onToggle={(e) => {
          const now = (e.currentTarget as HTMLDetailsElement).open;
          if (now !== open) setOpened(now);
        }}
      >
        <summary>
          {open ? n : short ? `${n}, one sample per series (a short run): show` : `${n}: show`}
        </summary>
        <p class="muted">What the agent sampled while the run's attempt ran, every GPUPLANE_TELEMETRY_S; the step is seconds since its process started.</p>
        {/* Folded: no chart, so nothing is fetched for it. */}
        {open && (
          <div class="charts system" data-system-panel>
            {shown.map((c) => (
              <MetricChart key={c.id} chartId={c.id} metricKey={c.id} title={c.title} height={200} runs={c.lines.map((l, i) => ({ id: runId, label: l.label, key: l.key, color: i }))} />
            ))}
          </div>
        )}
        {children}
      </details>
    </Section>
  );
}
