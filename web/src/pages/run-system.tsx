/**
 * The run page's System panel: the agent's telemetry of the run's cards and process group
 * (system-metrics.ts groups the keys), one chart per quantity with a line per card, below the
 * training curves. A run without any shows no panel.
 */
import type { ComponentChildren } from 'preact';
import { MetricChart } from '../charts/metric-chart.tsx';
import { Section } from '../components.tsx';
import type { SystemChart } from '../system-metrics.ts';

export function SystemPanel({ runId, charts, children }: { runId: string; charts: SystemChart[]; children?: ComponentChildren }) {
  if (charts.length === 0) return null;
  return (
    <Section title="System">
      <p class="muted">What the agent sampled while the run's attempt ran, every GPUPLANE_TELEMETRY_S; the step is seconds since its process started.</p>
      <div class="charts system" data-system-panel>
        {charts.map((c) => (
          <MetricChart key={c.id} chartId={c.id} metricKey={c.id} title={c.title} height={200} runs={c.lines.map((l, i) => ({ id: runId, label: l.label, key: l.key, color: i }))} />
        ))}
      </div>
      {children}
    </Section>
  );
}
