/**
 * A sweep's metric against one parameter: a dot per trial at its value of the parameter and its
 * best value of the metric, drawn with uPlot as a series of points and no line (x in ascending
 * order, as uPlot wants it). The best trial's dot is a series of its own, in the best badge's
 * colour. scatter.ts picks the axis: categories, linear, or log when the values span more than two
 * decades. The points are also a table, for those who cannot see the plot (and for tests).
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { metric } from '../format.ts';
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

function options(p: Props, width: number): uPlot.Options {
  const { axis } = p;
  const dots = (stroke: string, size: number) => ({ stroke, width: 0, paths: () => null, points: { show: true, size, width: 1, stroke, fill: stroke } });
  const categorical = axis.kind === 'category';
  return {
    width,
    height: p.height ?? 200,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: categorical
        ? { time: false, range: () => [-0.5, Math.max(axis.categories.length - 0.5, 0.5)] }
        : axis.kind === 'log'
          ? { time: false, distr: 3, log: 10 }
          : { time: false },
    },
    axes: [
      {
        label: p.param,
        ...(categorical
          ? {
              splits: () => axis.categories.map((_, i) => i),
              values: (_u: uPlot, splits: number[]) => splits.map((i) => axis.categories[i] ?? ''),
              grid: { show: false },
            }
          : {}),
      },
      { size: 60, label: p.metricName },
    ],
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
    const ro = new ResizeObserver(() => el.current?.clientWidth && u.setSize({ width: el.current.clientWidth, height: p.height ?? 200 }));
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
        {axis.kind !== 'linear' && <span class="muted"> ({axis.kind === 'log' ? 'log scale' : 'by value'})</span>}
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
