/**
 * An experiment's runs as a table: params (those that differ first), last values and tags, a
 * tick box to overlay each. Evaluation runs, when shown, are listed under the training run and
 * checkpoint they evaluate, by step.
 */
import { colorOf } from '../charts/metric-chart.tsx';
import { JobLink, RunLink, StateBadge, When } from '../components.tsx';
import { metric, show } from '../format.ts';
import { href } from '../router.ts';
import type { Run, Summary } from '../types.ts';
import { runLabel } from './run.tsx';

/** Params whose values differ between the runs first: they are what the runs compare. */
export function paramColumns(runs: Run[]): string[] {
  const keys = new Set<string>();
  for (const r of runs) for (const k of Object.keys(r.params)) keys.add(k);
  const differs = (k: string) => new Set(runs.map((r) => show(r.params[k]))).size > 1;
  return [...keys].sort((a, b) => Number(differs(b)) - Number(differs(a)) || a.localeCompare(b)).slice(0, 8);
}

/** The rows in order: each training run, then (when shown) the runs evaluating its checkpoints, by step; evaluations of runs not listed last. */
export function grouped(all: Run[], showEvals: boolean): Run[] {
  const training = all.filter((r) => !r.evaluates);
  if (!showEvals) return training;
  const byStep = (a: Run, b: Run) => (a.evaluates!.step ?? Infinity) - (b.evaluates!.step ?? Infinity) || a.started_at.localeCompare(b.started_at);
  const evals = all.filter((r) => r.evaluates).sort(byStep);
  const listed = new Set(training.map((r) => r.id));
  return [...training.flatMap((r) => [r, ...evals.filter((e) => e.evaluates!.run_id === r.id)]), ...evals.filter((e) => !listed.has(e.evaluates!.run_id))];
}

interface Props {
  rows: Run[];
  params: string[];
  /** The metrics whose last value each row shows. */
  lastOf: string[];
  last: Map<string, Record<string, Summary>>;
  colorOf: (id: string) => number | undefined;
  toggle: (id: string) => void;
}

function RunCell({ r }: { r: Run }) {
  const e = r.evaluates;
  if (!e) return <RunLink id={r.id} label={runLabel(r)} />;
  return (
    <>
      ↳ <RunLink id={r.id} label={runLabel(r)} /> <span class="muted">evaluates</span> <a href={href(['checkpoints'], { run: e.run_id, id: e.checkpoint_id })}>{e.checkpoint_id}</a>
      {e.step !== null && <span class="muted"> at step {e.step}</span>}
    </>
  );
}

export function RunsTable({ rows, params, lastOf, last, colorOf: colorIdx, toggle }: Props) {
  return (
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
            {lastOf.map((k) => (
              <th key={k}>last {k}</th>
            ))}
            <th>tags</th>
            <th>started</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => {
            const color = colorIdx(r.id);
            const cls = r.evaluates ? 'evaluation' : i > 0 && rows[i - 1].evaluates ? 'run-start' : undefined;
            return (
              <tr key={r.id} data-run={r.id} data-evaluates={r.evaluates?.checkpoint_id} data-parent={r.evaluates?.run_id} class={cls}>
                <td>
                  <input type="checkbox" checked={color !== undefined} onChange={() => toggle(r.id)} aria-label={`overlay ${r.id}`} />
                  {color !== undefined && <span class="swatch" style={{ background: colorOf(color) }} />}
                </td>
                <td class={r.evaluates ? 'evaluates' : undefined}>
                  <RunCell r={r} />
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
                {lastOf.map((k) => (
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
  );
}
