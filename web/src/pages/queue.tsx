/** Jobs by state, with filters and submission time, and a form to submit one. */
import { useState } from 'preact/hooks';
import { JOB_STATES } from '../../../domain/job-states.ts';
import { JOB_TYPES } from '../../../domain/job-types.ts';
import { api } from '../api.ts';
import { ErrorBox, JobLink, JobStateBadge, Loading, When } from '../components.tsx';
import { nodesOf, sizeLabel } from '../gang.ts';
import { useLive, useResource } from '../live.ts';
import { href } from '../router.ts';
import type { Job, JobState, ListJobsQuery, SubmitJobBody } from '../types.ts';

/** The newest this many jobs of the chosen state are listed (the counts cover them all). */
const PAGE = 500;

function SubmitForm({ onDone }: { onDone: (j: Job) => void }) {
  const [error, setError] = useState<Error | null>(null);
  const [busy, setBusy] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const s = (k: string) => String(f.get(k) ?? '').trim();
    setBusy(true);
    setError(null);
    try {
      const body: SubmitJobBody = { command: s('command'), type: s('type') as SubmitJobBody['type'], gpus: Number(s('gpus') || '1') };
      if (s('project')) body.project = s('project');
      if (s('experiment')) body.experiment = s('experiment');
      if (s('working_dir')) body.working_dir = s('working_dir');
      if (s('params')) body.params = JSON.parse(s('params')) as Record<string, unknown>;
      onDone(await api.submit(body));
    } catch (err) {
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  }
  return (
    <form class="submit" onSubmit={submit} aria-label="submit a job">
      <label class="wide">
        command <input name="command" required placeholder="python3 train.py --lr 0.1" />
      </label>
      <label>
        type
        <select name="type">
          {JOB_TYPES.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>
      <label>
        GPUs <input name="gpus" type="number" min={0} max={64} defaultValue="1" />
      </label>
      <label>
        project <input name="project" />
      </label>
      <label>
        experiment <input name="experiment" />
      </label>
      <label>
        working dir <input name="working_dir" placeholder="/tmp" />
      </label>
      <label class="wide">
        params (JSON) <input name="params" placeholder='{"lr": 0.1}' />
      </label>
      <button type="submit" disabled={busy}>
        Submit
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

export function QueuePage({ query }: { query: URLSearchParams }) {
  const state = (query.get('state') ?? '') as JobState | '';
  const type = query.get('type') ?? '';
  const project = query.get('project') ?? '';
  const [showForm, setShowForm] = useState(false);
  const setFilter = (k: string, v: string) => {
    const next = { state, type, project, [k]: v };
    location.hash = href(['queue'], next);
  };
  // The server filters and counts: the newest page of jobs says nothing of the older ones.
  const q: ListJobsQuery = { limit: String(PAGE) };
  if (state) q.state = state;
  if (type) q.type = type as ListJobsQuery['type'];
  if (project) q.project = project;
  const jobs = useResource(() => api.jobs(q), [state, type, project], { topics: ['jobs'] });
  const counts = useResource(() => api.jobCounts({ type: q.type, project: q.project }), [type, project], { topics: ['jobs'] });
  const shown = jobs.data ?? [];
  // A running job's stall is an event of the job and a change of its attempt, not of its row.
  useLive({ topics: ['events'], jobId: shown.filter((j) => j.state === 'RUNNING').map((j) => j.id) }, jobs.reload);
  const total = counts.data?.total;
  const countOf = (s: JobState) => counts.data?.states[s] ?? '…';
  return (
    <>
      <h1>
        Queue <button onClick={() => setShowForm(!showForm)}>{showForm ? 'Close' : 'Submit a job'}</button>
      </h1>
      {showForm && (
        <SubmitForm
          onDone={(j) => {
            setShowForm(false);
            location.hash = href(['jobs', j.id]);
          }}
        />
      )}
      <div class="filters">
        <span class="tabs" role="tablist">
          <a href={href(['queue'], { type, project })} class={state === '' ? 'active' : ''}>
            all <span data-count="all">{total ?? '…'}</span>
          </a>
          {JOB_STATES.map((s) => (
            <a key={s} href={href(['queue'], { state: s, type, project })} class={state === s ? 'active' : ''} data-filter-state={s}>
              {s.toLowerCase()} <span data-count={s}>{countOf(s)}</span>
            </a>
          ))}
        </span>
        <select value={type} onChange={(e) => setFilter('type', (e.target as HTMLSelectElement).value)} aria-label="type">
          <option value="">any type</option>
          {JOB_TYPES.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
        {/* Uncontrolled, keyed by the URL's value: a live refresh never resets what is being typed. */}
        <input
          key={project}
          placeholder="project"
          defaultValue={project}
          aria-label="project"
          onChange={(e) => setFilter('project', (e.target as HTMLInputElement).value)}
        />
      </div>
      <ErrorBox error={jobs.error ?? counts.error} />
      {!jobs.data ? (
        !jobs.error && <Loading what="jobs" />
      ) : (
        <table class="jobs">
          <thead>
            <tr>
              <th>job</th>
              <th>type</th>
              <th>state</th>
              <th>attempt</th>
              <th>GPUs</th>
              <th>node</th>
              <th>priority</th>
              <th>submitted</th>
              <th>reason</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((j) => (
              <tr key={j.id} data-job={j.id}>
                <td>
                  <JobLink id={j.id} />
                </td>
                <td>{j.type}</td>
                <td>
                  <JobStateBadge job={j} />
                </td>
                <td>{j.attempt}</td>
                <td data-column="gpus">{sizeLabel(j)}</td>
                <td data-column="nodes">{nodesOf(j).join(', ')}</td>
                <td>{j.priority}</td>
                <td>
                  <When at={j.created_at} />
                </td>
                <td class="reason">{j.reason ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {jobs.data && shown.length === 0 && <p class="muted">No jobs{state ? ` ${state}` : ''}.</p>}
      {shown.length === PAGE && <p class="muted">The newest {PAGE} are listed; filter by state, type or project to see others.</p>}
    </>
  );
}
