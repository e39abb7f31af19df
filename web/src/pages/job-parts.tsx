/** The pieces of the job page: its timeline, failure, stall, attempts, log tail and a gang's rank tabs. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorBox, StalledBadge, StateBadge, When } from '../components.tsx';
import { duration, show, splitReason, time } from '../format.ts';
import { rankTabs } from '../log-ranks.ts';
import { stallNote } from '../stall.ts';
import type { Attempt, JobDetail, RunEvent, Transition } from '../types.ts';

/** The states as bars on one time axis: how long the job spent in each, attempt by attempt. */
export function Timeline({ history, ended }: { history: Transition[]; ended: string | null }) {
  if (history.length === 0) return <p class="muted">no transitions yet</p>;
  const t0 = Date.parse(history[0].at);
  const tEnd = ended ? Date.parse(ended) : Date.now();
  const span = Math.max(tEnd - t0, 1);
  const segs = history.map((h, i) => {
    const start = Date.parse(h.at);
    const end = i + 1 < history.length ? Date.parse(history[i + 1].at) : tEnd;
    return { h, start, end };
  });
  return (
    <div class="timeline">
      <div class="bar">
        {segs.map(({ h, start, end }, i) => (
          <span
            key={i}
            class={`seg state-${h.to}`}
            style={{ left: `${((start - t0) / span) * 100}%`, width: `${Math.max(((end - start) / span) * 100, 0.5)}%` }}
            title={`${h.to} #${h.attempt}: ${time(h.at)} (${duration(end - start)})`}
          />
        ))}
      </div>
      <ol class="transitions">
        {history.map((h, i) => (
          <li key={i} data-to={h.to}>
            <time title={time(h.at)}>{new Date(h.at).toLocaleTimeString()}</time> #{h.attempt} {h.from ? <StateBadge state={h.from} /> : '∅'} → <StateBadge state={h.to} />{' '}
            <span class="muted">{h.detail ?? ''}</span>
          </li>
        ))}
      </ol>
    </div>
  );
}

/** Why a job that has not started waits: for a QUEUED job the API works it out for each answer (no node matches, waiting for cards, held, …). */
export function Waiting({ reason }: { reason: string | null }) {
  if (!reason) return null;
  return (
    <p class="waiting" data-testid="waiting">
      <strong>Waiting:</strong> {reason}
    </p>
  );
}

export function Failure({ reason }: { reason: string | null }) {
  const r = splitReason(reason);
  if (!r.reason) return null;
  return (
    <div class="failure" data-testid="failure">
      <p>
        <strong>Reason:</strong> {r.reason}
      </p>
      {r.hint && (
        <p class="hint">
          <strong>Hint:</strong> {r.hint}
        </p>
      )}
    </div>
  );
}

/** A stalled job's note: since when, what stalled means for it (its stall-after), and what the plane does about it. */
export function Stalled({ job, events }: { job: JobDetail; events: RunEvent[] }) {
  const n = stallNote(job, events);
  if (!n) return null;
  return (
    <div class="stall-note" data-testid="stalled">
      <p>
        <strong>Stalled</strong> since <time title={time(n.since)}>{time(n.since)}</time> (<When at={n.since} />): {n.means}.
      </p>
      <p class="muted">{n.then}</p>
    </div>
  );
}

export function Attempts({ attempts }: { attempts: Attempt[] }) {
  return (
    <table class="attempts">
      <thead>
        <tr>
          <th>#</th>
          <th>state</th>
          <th>node · GPUs</th>
          <th>started</th>
          <th>ran</th>
          <th>exit</th>
          <th>changes from the attempt before</th>
          <th>reason</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a) => (
          <tr key={a.attempt} data-attempt={a.attempt}>
            <td>{a.attempt}</td>
            <td>
              <StateBadge state={a.state} />
              {a.stalled_at && (
                <>
                  {' '}
                  <StalledBadge at={a.stalled_at} />
                </>
              )}
            </td>
            <td>
              {a.node_id ?? ''} {a.gpu_indices?.length ? `[${a.gpu_indices.join(',')}]` : ''}
            </td>
            <td>
              <When at={a.started_at} />
            </td>
            <td>{a.started_at ? duration((a.ended_at ? Date.parse(a.ended_at) : Date.now()) - Date.parse(a.started_at)) : ''}</td>
            <td>{a.exit_code ?? a.signal ?? ''}</td>
            <td class="diff">
              {a.changes.map((c) => (
                <div key={c.key}>
                  <code>{c.key}</code>: <del>{show(c.from)}</del> → <ins>{show(c.to)}</ins>
                </div>
              ))}
            </td>
            <td class="reason">{a.reason ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The attempt's (a gang member's) stdout and stderr as they arrive (follow=true), the last 2,000 lines kept. */
export function LogTail({ jobId, attempt, rank = 0, live }: { jobId: string; attempt: number; rank?: number; live: boolean }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<Error | null>(null);
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const ac = new AbortController();
    setText('');
    setError(null);
    let buf = '';
    api
      .followLog(
        jobId,
        attempt,
        (s) => {
          buf += s;
          const lines = buf.split('\n');
          if (lines.length > 2000) buf = lines.slice(-2000).join('\n');
          setText(buf);
        },
        ac.signal,
        rank,
      )
      .catch((err: Error) => !ac.signal.aborted && setError(err));
    return () => ac.abort();
    // A new follow when the attempt starts running (the first follow may have ended before it had a log).
  }, [jobId, attempt, rank, live]);
  useEffect(() => {
    const el = pre.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [text]);
  return (
    <>
      <ErrorBox error={error} />
      <pre class="log" ref={pre} data-testid="log">
        {text || <span class="muted">no output yet</span>}
      </pre>
    </>
  );
}

/** A gang attempt's ranks as tabs above its log; nothing for a single-node attempt. */
export function RankTabs({ ranks, rank, onPick }: { ranks: readonly number[]; rank: number; onPick: (rank: number) => void }) {
  const tabs = rankTabs(ranks);
  if (!tabs.length) return null;
  return (
    <div class="tabs ranks" role="tablist" aria-label="rank">
      {tabs.map((t) => (
        <button key={t.rank} type="button" role="tab" aria-selected={t.rank === rank} class={t.rank === rank ? 'active' : ''} data-rank={t.rank} onClick={() => onPick(t.rank)}>
          {t.label}
        </button>
      ))}
    </div>
  );
}
