/** Small pieces every page uses. */
import type { ComponentChildren } from 'preact';
import { ago, show, time } from './format.ts';
import { href } from './router.ts';
import { STALLED_MEANS } from './stall.ts';
import type { RunEvent } from './types.ts';

export function StateBadge({ state }: { state: string }) {
  return (
    <span class={`badge state-${state}`} data-state={state}>
      {state}
    </span>
  );
}

/** A RUNNING job (or attempt) that may hang: it is RUNNING all the same, so this goes beside its state's badge. */
export function StalledBadge({ at }: { at: string }) {
  return (
    <span class="badge stalled" data-stalled={at} title={`stalled since ${time(at)}: ${STALLED_MEANS}`}>
      stalled
    </span>
  );
}

/** A job's state, and whether it is stalled. */
export function JobStateBadge({ job }: { job: { state: string; stalled_at: string | null } }) {
  return (
    <>
      <StateBadge state={job.state} />
      {job.stalled_at && (
        <>
          {' '}
          <StalledBadge at={job.stalled_at} />
        </>
      )}
    </>
  );
}

export function JobLink({ id }: { id: string | null }) {
  return id ? <a href={href(['jobs', id])}>{id}</a> : null;
}

export function RunLink({ id, label }: { id: string | null; label?: string | null }) {
  return id ? <a href={href(['runs', id])}>{label ?? id}</a> : null;
}

export function When({ at }: { at: string | null | undefined }) {
  return at ? <time title={time(at)}>{ago(at)}</time> : null;
}

export function ErrorBox({ error }: { error: Error | undefined | null }) {
  return error ? (
    <p class="error" role="alert">
      {error.message}
    </p>
  ) : null;
}

export function Loading({ what }: { what: string }) {
  return <p class="muted">Loading {what}…</p>;
}

export function Section({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section>
      <h2>
        {title} {actions}
      </h2>
      {children}
    </section>
  );
}

/** A two-column table of a record (params, tags, env). */
export function KeyValues({ data, empty = 'none' }: { data: Record<string, unknown>; empty?: string }) {
  const entries = Object.entries(data).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return <p class="muted">{empty}</p>;
  return (
    <table class="kv">
      <tbody>
        {entries.map(([k, v]) => (
          <tr key={k}>
            <th>{k}</th>
            <td>{show(v)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function EventList({ events }: { events: RunEvent[] }) {
  if (events.length === 0) return <p class="muted">no events</p>;
  return (
    <table class="events">
      <tbody>
        {events
          .slice(-200)
          .reverse()
          .map((e) => (
            <tr key={e.id} class={`level-${e.level}`}>
              <td>
                <When at={e.at} />
              </td>
              <td>
                <code>{e.kind}</code>
              </td>
              <td>{e.attempt === null ? '' : `#${e.attempt}`}</td>
              <td>{e.message}</td>
            </tr>
          ))}
      </tbody>
    </table>
  );
}

/** The button-styled link to a workflow's page in the Temporal UI (useWorkflowUrl), or nothing when there is none. */
export function WorkflowLink({ url }: { url: string | null }) {
  return url ? (
    <a class="button" href={url} target="_blank" rel="noreferrer">
      Workflow in Temporal ↗
    </a>
  ) : null;
}
