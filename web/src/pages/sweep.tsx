/**
 * One sweep (GET /sweeps/:id): its state and settings, its best trial (with the best checkpoint
 * of the trials' runs), the leaderboard in the API's order, every trial's curve of the sweep's
 * metric overlaid on one chart (each trial its colour, kept as the leaderboard reorders), and a
 * scatter of each trial's best value against each parameter.
 */
import { api } from '../api.ts';
import { colorOf, MetricChart, type ChartRun } from '../charts/metric-chart.tsx';
import { ParamScatter } from '../charts/param-scatter.tsx';
import { listedValues, scatterAxis } from '../charts/scatter.ts';
import { ErrorBox, JobLink, Loading, RunLink, Section, StateBadge, When } from '../components.tsx';
import { metric, show } from '../format.ts';
import { useLive, usePollWhile, useResource } from '../live.ts';
import { href } from '../router.ts';
import { num, type SweepDetail, type WireValue } from '../types.ts';
import { metricLabel, SWEEP_POLL_MS } from './sweeps.tsx';

/** The parameters, in name order as the sweep takes them (docs/sweeps.md), from the file or else the trials. */
function paramNames(s: SweepDetail): string[] {
  const fromSpec = Object.keys((s.spec as { parameters?: Record<string, unknown> } | null)?.parameters ?? {});
  const names = fromSpec.length ? fromSpec : s.leaderboard.flatMap((t) => Object.keys(t.params));
  return [...new Set(names)].sort();
}

/** "0.1234 @ 90": a value and its step. */
const at = (p: { value: WireValue; step: number | null } | null) => (p ? `${metric(p.value)}${p.step === null ? '' : ` @ ${p.step}`}` : '—');

function Settings({ s }: { s: SweepDetail }) {
  const asha = (s.spec as { asha?: { reduction_factor: number } } | null)?.asha;
  return (
    <table class="kv" data-testid="sweep-settings">
      <tbody>
        <tr>
          <th>method</th>
          <td data-field="method">{s.method}</td>
        </tr>
        <tr>
          <th>metric</th>
          <td data-field="metric">
            {s.metric.name} ({s.metric.goal === 'minimize' ? 'minimize: lower is better' : 'maximize: higher is better'})
          </td>
        </tr>
        <tr>
          <th>seed</th>
          <td data-field="seed">{s.seed}</td>
        </tr>
        {s.method === 'asha' && (
          <tr>
            <th>ASHA rungs</th>
            <td data-field="rungs">
              steps {s.rungs.join(', ')}
              {asha && `; the best 1/${asha.reduction_factor} go on at each`}
            </td>
          </tr>
        )}
        <tr>
          <th>trials</th>
          <td data-field="trials">
            {s.trials.started} of {s.trials.total} started, {s.trials.running} running, {s.trials.ended} ended
          </td>
        </tr>
        <tr>
          <th>project</th>
          <td>
            {s.project ? <a href={href(['experiments'], { project: s.project, experiment: s.experiment ?? undefined })}>{s.experiment ? `${s.project} / ${s.experiment}` : s.project}</a> : '—'}
          </td>
        </tr>
        <tr>
          <th>created</th>
          <td>
            <When at={s.created_at} />
            {s.created_by && ` by ${s.created_by}`}
            {s.ended_at && (
              <>
                , ended <When at={s.ended_at} />
              </>
            )}
          </td>
        </tr>
      </tbody>
    </table>
  );
}

function BestTrial({ s }: { s: SweepDetail }) {
  const b = s.best;
  if (!b) return <p class="muted">No trial has logged {s.metric.name} yet.</p>;
  return (
    <p class="metric" data-testid="best-trial" data-trial={b.trial} data-run={b.run_id ?? undefined} data-checkpoint={b.checkpoint_id ?? undefined}>
      <span class="badge best">best</span> trial {b.trial}: {s.metric.name} = <strong>{at(b)}</strong>, run <RunLink id={b.run_id} />, job <JobLink id={b.job_id} />
      {b.checkpoint_id ? (
        <>
          ; its best checkpoint <a href={href(['checkpoints'], { run: b.run_id ?? undefined, id: b.checkpoint_id })}>{b.checkpoint_id}</a>
          {b.fallback ? ' (by its training-time value: no checkpoint was evaluated for the metric)' : ' (evaluated)'}
        </>
      ) : (
        '; no checkpoint'
      )}
    </p>
  );
}

function Leaderboard({ s, params }: { s: SweepDetail; params: string[] }) {
  const asha = s.method === 'asha';
  return (
    <div class="scroll">
      <table class="leaderboard sweep-trials">
        <thead>
          <tr>
            <th>trial</th>
            <th>job</th>
            <th>state</th>
            <th>{s.metric.name} best @ step</th>
            {asha && <th>rung</th>}
            {params.map((p) => (
              <th key={p} data-param={p}>
                {p}
              </th>
            ))}
            <th>reason</th>
          </tr>
        </thead>
        <tbody>
          {s.leaderboard.map((t) => (
            <tr key={t.trial} data-trial={t.trial} data-job={t.job_id} class={s.best?.trial === t.trial ? 'selected' : undefined}>
              <td>
                {t.trial} <span class="swatch" style={{ background: colorOf(t.trial) }} />
                {s.best?.trial === t.trial && <span class="badge best">best</span>}
              </td>
              <td>
                <JobLink id={t.job_id} />
                {t.attempt > 1 && ` #${t.attempt}`}
              </td>
              <td>
                <StateBadge state={t.state} />
                {t.stopped && <span class="badge state-PREEMPTED">stopped</span>}
              </td>
              <td data-column="best">{at(t.best)}</td>
              {asha && <td data-column="rung">{t.rung === null ? '—' : `${t.rung} (step ${t.rung_step ?? '?'})`}</td>}
              {params.map((p) => (
                <td key={p} data-param={p}>
                  {p in t.params ? show(t.params[p]) : ''}
                </td>
              ))}
              <td class="reason">{t.reason}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Scatters({ s, params }: { s: SweepDetail; params: string[] }) {
  const scored = s.leaderboard.flatMap((t) => {
    const v = num(t.best?.value);
    return v !== null && Number.isFinite(v) ? [{ t, value: v }] : [];
  });
  if (scored.length === 0) return <p class="muted">No trial has a value of {s.metric.name} yet.</p>;
  return (
    <div class="scatters">
      {params.map((p) => (
        <ParamScatter
          key={p}
          param={p}
          metricName={s.metric.name}
          best={s.best?.trial ?? null}
          axis={scatterAxis(
            scored.filter(({ t }) => p in t.params).map(({ t, value }) => ({ trial: t.trial, param: t.params[p], value })),
            listedValues(s.spec, p),
          )}
        />
      ))}
    </div>
  );
}

export function SweepPage({ id }: { id: string }) {
  const sweep = useResource(() => api.sweep(id), [id], { topics: ['jobs', 'runs', 'checkpoints'] });
  const s = sweep.data;
  // New points of its trials' runs move the leaderboard's values (the chart follows them by itself);
  // the job list makes it a filter even before any trial has a run.
  const trials = s?.leaderboard ?? [];
  useLive({ topics: ['metrics'], runId: trials.flatMap((t) => (t.run_id ? [t.run_id] : [])), jobId: trials.map((t) => t.job_id) }, sweep.reload);
  usePollWhile(s?.state === 'RUNNING', SWEEP_POLL_MS, sweep.reload);
  if (!s) return sweep.error ? <ErrorBox error={sweep.error} /> : <Loading what={`sweep ${id}`} />;
  const params = paramNames(s);
  // In trial order, so that a trial keeps its line (and the chart its data) as the leaderboard reorders.
  const curves: ChartRun[] = [...s.leaderboard].sort((a, b) => a.trial - b.trial).flatMap((t) => (t.run_id ? [{ id: t.run_id, label: `trial ${t.trial}`, color: t.trial }] : []));
  return (
    <>
      <h1>
        Sweep {s.id} <StateBadge state={s.state} /> <span class="muted">{metricLabel(s.metric)}</span>
      </h1>
      {s.reason && (
        <p class="muted" data-testid="sweep-reason">
          {s.reason}
        </p>
      )}
      <ErrorBox error={sweep.error} />
      <Settings s={s} />
      <Section title="Best trial">
        <BestTrial s={s} />
      </Section>
      <Section title="Leaderboard">
        <Leaderboard s={s} params={params} />
      </Section>
      <Section title={`${s.metric.name}, every trial`}>
        <div class="charts">{curves.length > 0 ? <MetricChart chartId={`sweep:${s.id}`} metricKey={s.metric.name} runs={curves} height={curves.length > 12 ? 320 : 260} /> : <p class="muted">No trial has a run yet.</p>}</div>
      </Section>
      <Section title={`${s.metric.name} by parameter`}>
        <Scatters s={s} params={params} />
      </Section>
    </>
  );
}
