/** The pieces of a sweep's page (sweep.tsx): its settings, its best trial, its leaderboard. */
import { paramText } from '../../../domain/param-text.ts';
import { colorOf } from '../charts/metric-chart.tsx';
import { JobLink, RunLink, StateBadge, When } from '../components.tsx';
import { metric, show } from '../format.ts';
import { href } from '../router.ts';
import type { SweepDetail, WireValue } from '../types.ts';

/** "0.1234 @ 90": a value and its step. */
const at = (p: { value: WireValue; step: number | null } | null) => (p ? `${metric(p.value)}${p.step === null ? '' : ` @ ${p.step}`}` : '—');

export function Settings({ s }: { s: SweepDetail }) {
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

export function BestTrial({ s }: { s: SweepDetail }) {
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

export function Leaderboard({ s, params }: { s: SweepDetail; params: string[] }) {
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
                {t.stopped && (
                  <span class="badge state-PREEMPTED" data-stopped title="ASHA stopped it at a rung">
                    stopped
                  </span>
                )}
              </td>
              <td data-column="best">{at(t.best)}</td>
              {asha && <td data-column="rung">{t.rung === null ? '—' : `${t.rung} (step ${t.rung_step ?? '?'})`}</td>}
              {params.map((p) => (
                <td key={p} data-param={p}>
                  {p in t.params ? <span title={show(t.params[p])}>{paramText(t.params[p])}</span> : ''}
                </td>
              ))}
              {/* Cut to the column's width with an ellipsis; the whole reason in its title. */}
              <td class="reason">{t.reason && <span title={t.reason}>{t.reason}</span>}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
