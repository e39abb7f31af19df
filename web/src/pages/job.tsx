/**
 * One job: its timeline of states, its attempts with the config diff between them, the failure
 * reason and its hint, whether it is stalled, a live log tail, Retry (with an edit) and Cancel,
 * and its workflow in the Temporal Web UI.
 */
import { useState } from 'preact/hooks';
import { canTransition, isTerminal } from '../../../domain/job-states.ts';
import { shellJoin } from '../../../domain/shell-quote.ts';
import { useAction, useWorkflowUrl } from '../actions.ts';
import { api } from '../api.ts';
import { ErrorBox, EventList, JobLink, JobStateBadge, Loading, RunLink, Section, When, WorkflowLink } from '../components.tsx';
import { placementLine } from '../gang.ts';
import { Members } from './job-members.tsx';
import { useResource } from '../live.ts';
import { logRanks } from '../log-ranks.ts';
import { commandField, editedCommand } from '../retry-command.ts';
import { href } from '../router.ts';
import type { JobDetail, RetryBody } from '../types.ts';
import { Attempts, Failure, LogTail, RankTabs, Stalled, Timeline, Waiting } from './job-parts.tsx';

function RetryForm({ job, onDone }: { job: JobDetail; onDone: () => void }) {
  const [error, setError] = useState<Error | null>(null);
  const last = job.attempts[job.attempts.length - 1];
  // What the form started from, kept while it is open: a live refresh of the job re-renders
  // the form, and must neither reset what was typed nor move what an edit is compared with.
  const [start] = useState(() => ({ cmd: commandField(job.command), gpus: job.gpus }));
  const cmd = start.cmd;
  async function submit(e: Event) {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const s = (k: string) => String(f.get(k) ?? '').trim();
    const body: RetryBody = {};
    try {
      const command = editedCommand(s('command'), cmd);
      if (command !== undefined) body.command = command;
      if (s('gpus') && Number(s('gpus')) !== start.gpus) body.gpus = Number(s('gpus'));
      if (s('params')) body.params = JSON.parse(s('params')) as Record<string, unknown>;
      if (s('env')) body.env = JSON.parse(s('env')) as Record<string, string>;
      await api.retry(job.id, body);
      onDone();
    } catch (err) {
      setError(err as Error);
    }
  }
  return (
    <form class="retry" onSubmit={submit} aria-label="retry with an edit">
      <p class="muted">Attempt {(last?.attempt ?? job.attempt) + 1} starts from attempt {last?.attempt ?? job.attempt}'s config with these changes; params and env are merged key by key.</p>
      <label class="wide">
        command <input name="command" defaultValue={cmd} />
      </label>
      <label>
        GPUs <input name="gpus" type="number" min={0} max={64} defaultValue={String(start.gpus)} />
      </label>
      <label class="wide">
        params to change (JSON) <input name="params" placeholder={JSON.stringify(job.params)} />
      </label>
      <label class="wide">
        env to change (JSON) <input name="env" placeholder='{"KEY": "value"}' />
      </label>
      <button type="submit">Retry</button>
      <ErrorBox error={error} />
    </form>
  );
}

export function JobPage({ id }: { id: string }) {
  // A stall changes no job row, only its attempt's, with a job.stalled event: the job is fetched again on its events too.
  const job = useResource(() => api.job(id), [id], { topics: ['jobs', 'events'], jobId: id });
  const events = useResource(() => api.jobEvents(id), [id], { topics: ['events', 'jobs'], jobId: id });
  const runs = useResource(() => api.runs({ job: id }), [id], { topics: ['runs'] });
  const workflowUrl = useWorkflowUrl(`job/${id}`);
  const [retrying, setRetrying] = useState(false);
  const action = useAction(job.reload);
  const [logAttempt, setLogAttempt] = useState<number | null>(null);
  const [logRank, setLogRank] = useState(0);
  const j = job.data;
  if (!j) return job.error ? <ErrorBox error={job.error} /> : <Loading what={`job ${id}`} />;
  const attempt = logAttempt ?? j.attempt;
  // A gang's members each have a log; an attempt with fewer ranks than the one picked shows rank 0.
  const ranks = logRanks(j.attempts.find((a) => a.attempt === attempt)?.config);
  const rank = ranks.includes(logRank) ? logRank : 0;
  const cancel = () => action.run(() => api.cancel(j.id));
  return (
    <>
      <h1>
        {j.id} <JobStateBadge job={j} />
        <span class="actions">
          {!isTerminal(j.state) && (
            <button class="danger" onClick={cancel} data-action="cancel">
              Cancel
            </button>
          )}
          {canTransition(j.state, 'CREATED') && (
            <button onClick={() => setRetrying(!retrying)} data-action="retry">
              {retrying ? 'Close' : 'Retry…'}
            </button>
          )}
          <WorkflowLink url={workflowUrl} />
        </span>
      </h1>
      <ErrorBox error={action.error} />
      <p class="muted">
        {j.type} · attempt {j.attempt} · {placementLine(j)} · priority {j.priority} · submitted <When at={j.created_at} />
        {j.parent_job_id && (
          <>
            {' '}
            · evaluates a checkpoint of <JobLink id={j.parent_job_id} />
          </>
        )}
        {!workflowUrl && ` · workflow job/${j.id} (no Temporal Web UI configured)`}
      </p>
      <p>
        <code>{shellJoin(j.command)}</code> <span class="muted">in {j.working_dir}</span>
        {j.image && (
          <span data-testid="job-image">
            {' '}
            <span class="muted">in image</span> <code>{j.image}</code>
          </span>
        )}
      </p>
      {retrying && (
        <RetryForm
          job={j}
          onDone={() => {
            setRetrying(false);
            setLogAttempt(null);
            job.reload();
          }}
        />
      )}
      {(j.state === 'FAILED' || j.state === 'LOST' || j.state === 'CANCELLED') && <Failure reason={j.reason} />}
      {(j.state === 'QUEUED' || j.state === 'CREATED') && <Waiting reason={j.reason} />}
      <Stalled job={j} events={events.data ?? []} />
      <Section title="Timeline">
        <Timeline history={j.history} ended={isTerminal(j.state) ? j.ended_at : null} />
      </Section>
      <Section title="Attempts">
        <Attempts attempts={j.attempts} />
      </Section>
      <Members job={j} />
      {runs.data && runs.data.length > 0 && (
        <Section title="Runs">
          <ul>
            {runs.data.map((r) => (
              <li key={r.id}>
                <RunLink id={r.id} label={`${r.name ?? r.id} (attempt ${r.attempt ?? '?'}, ${r.status})`} />
                {r.project && (
                  <>
                    {' '}
                    · <a href={href(['experiments'], { project: r.project, experiment: r.experiment ?? undefined })}>experiment {r.project}/{r.experiment}</a>
                  </>
                )}
              </li>
            ))}
          </ul>
        </Section>
      )}
      <Section
        title="Log"
        actions={
          j.attempts.length > 1 && (
            <select value={String(attempt)} onChange={(e) => setLogAttempt(Number((e.target as HTMLSelectElement).value))} aria-label="attempt">
              {j.attempts.map((a) => (
                <option key={a.attempt} value={String(a.attempt)}>
                  attempt {a.attempt}
                </option>
              ))}
            </select>
          )
        }
      >
        <RankTabs ranks={ranks} rank={rank} onPick={setLogRank} />
        <LogTail jobId={j.id} attempt={attempt} rank={rank} live={j.state === 'RUNNING'} />
      </Section>
      <Section title="Events">{events.data ? <EventList events={events.data} /> : <Loading what="events" />}</Section>
    </>
  );
}
