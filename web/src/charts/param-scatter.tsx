/**
 * A sweep's metric against one parameter: a dot per trial at its value of the parameter and its
 * best value of the metric, drawn with uPlot as a series of points and no line (x in ascending
 * order, as uPlot wants it). The best trial's dot is a series of its own, in the best badge's
 * colour. scatter.ts picks the axis: categories, linear, or log when the values span more than two
 * decades; neither axis puts a dot on the frame. The points are also a table, for those who cannot
 * see the plot (and for tests).
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { metric } from '../format.ts';
import { padRange } from './bands.ts';
import type { ScatterAxis } from './scatter.ts';

interface Props {
  param: string;
  metricName: string;
  axis: ScatterAxis;
  /** The sweep's best trial, drawn apart. */
  best: number | null;
  height?: number;
}

const DOT = '#2563eb';
const BEST = '#f59e0b';
const HEIGHT = 220;

/** The powers of ten in [min, max]: a log axis's ticks, one a decade. */
function decades(min: number, max: number): number[] {
  const out: number[] = [];
  for (let k = Math.ceil(Math.log10(min)); k <= Math.floor(Math.log10(max)); k++) out.push(10 ** k);
  return out;
}

/** 0.001, 1000, 1e-5: a power of ten as a person writes it (uPlot hands in null for a tick it leaves unlabelled, for room). */
const decade = (v: number) => {
  const k = Math.round(Math.log10(v));
  return k >= -3 && k <= 4 ? (10 ** k).toFixed(Math.max(0, -k)) : `1e${k}`;
};

/** The x axis scatter.ts chose: a slot per category, decades on a log scale, or a linear one; points never on the edge. */
function xAxis(axis: ScatterAxis): { scale: uPlot.Scale; axis: uPlot.Axis } {
  if (axis.kind === 'category') {
    return {
      scale: { time: false, range: () => [-0.5, Math.max(axis.categories.length - 0.5, 0.5)] },
      axis: { splits: () => axis.categories.map((_, i) => i), values: (_u, splits) => splits.map((i) => axis.categories[i] ?? ''), grid: { show: false } },
    };
  }
  if (axis.kind === 'log') {
    return {
      // A factor of 2 either side: the smallest and largest values are not on the frame.
      scale: { time: false, distr: 3, log: 10, range: (_u, min, max) => [min / 2, max * 2] },
      axis: { splits: (_u, _i, min, max) => decades(min, max), values: (_u, splits) => splits.map((v) => (v ? decade(v) : '')) },
    };
  }
  return { scale: { time: false, range: (_u, min, max) => padRange(min, max) }, axis: {} };
}

function options(p: Props, width: number): uPlot.Options {
  const dots = (stroke: string, size: number) => ({ stroke, width: 0, paths: () => null, points: { show: true, size, width: 1, stroke, fill: stroke } });
  const x = xAxis(p.axis);
  return {
    width,
    height: p.height ?? HEIGHT,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: x.scale, y: { range: (_u, min, max) => padRange(min, max) } },
    axes: [{ label: p.param, ...x.axis }, { size: 60, label: p.metricName, space: 20 }],
    series: [{ label: p.param }, { label: 'trials', ...dots(DOT, 7) }, { label: 'best trial', ...dots(BEST, 10) }],
  };
}

export function ParamScatter(p: Props) {
  const el = useRef<HTMLDivElement>(null);
  const { axis, best } = p;
  const key = JSON.stringify([axis, best, p.metricName]);
  useEffect(() => {
    const x = axis.points.map((q) => q.x);
    const y = axis.points.map((q) => (q.trial === best ? null : q.y));
    const b = axis.points.map((q) => (q.trial === best ? q.y : null));
    const u = new uPlot(options(p, el.current!.clientWidth || 300), [x, y, b], el.current!);
    const ro = new ResizeObserver(() => el.current?.clientWidth && u.setSize({ width: el.current.clientWidth, height: p.height ?? HEIGHT }));
    ro.observe(el.current!);
    return () => {
      ro.disconnect();
      u.destroy();
    };
  }, [key]);
  return (
    <figure class="chart scatter">
      <figcaption>
        <strong>{p.metricName}</strong> by <strong>{p.param}</strong>
        {axis.kind !== 'linear' && <span class="muted"> ({axis.kind === 'log' ? 'log scale' : 'by category'})</span>}
      </figcaption>
      <div ref={el} class="plot" data-scatter={p.param} data-axis={axis.kind} data-points={axis.points.length} />
      <table class="visually-hidden" data-scatter-table={p.param}>
        <caption>
          {p.metricName} by {p.param}
        </caption>
        <thead>
          <tr>
            <th>trial</th>
            <th>{p.param}</th>
            <th>{p.metricName}</th>
          </tr>
        </thead>
        <tbody>
          {axis.points.map((q) => (
            <tr key={q.trial} data-trial={q.trial}>
              <td>{q.trial}</td>
              <td>{q.label}</td>
              <td>{metric(q.y)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
