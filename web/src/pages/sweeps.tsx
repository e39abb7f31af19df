/**
 * Sweeps, newest first (GET /sweeps: the 200 newest the token may read): each one's state, method,
 * metric, trials started of its total and running now, project and age, linked to its page.
 */
import { api } from '../api.ts';
import { ErrorBox, Loading, StateBadge, When } from '../components.tsx';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import type { Sweep } from '../types.ts';

/** "train/loss ↓": the metric and which way is better. */
export const metricLabel = (m: Sweep['metric']) => `${m.name} ${m.goal === 'minimize' ? '↓' : '↑'}`;

export function SweepsPage({ query }: { query: URLSearchParams }) {
  const project = query.get('project') ?? '';
  // A trial's job changing is a `jobs` change; a sweep's own row or a trial's (a start, a stop, the end) a `sweeps` one.
  const list = useResource(() => api.sweeps({ project: project || undefined }), [project], { topics: ['jobs', 'sweeps'] });
  const sweeps = list.data;
  return (
    <>
      <h1>Sweeps{project && ` of ${project}`}</h1>
      <ErrorBox error={list.error} />
      {!sweeps ? (
        <Loading what="sweeps" />
      ) : sweeps.length === 0 ? (
        <p class="muted">
          No sweeps{project && ` in ${project}`} yet: <code>gpuctl sweep create sweep.yaml</code> starts one (docs/sweeps.md).
        </p>
      ) : (
        <div class="scroll">
          <table class="sweeps">
            <thead>
              <tr>
                <th>sweep</th>
                <th>state</th>
                <th>method</th>
                <th>metric</th>
                <th>trials</th>
                <th>running</th>
                <th>project</th>
                <th>created</th>
              </tr>
            </thead>
            <tbody>
              {sweeps.map((s) => (
                <tr key={s.id} data-sweep={s.id}>
                  <td>
                    <a href={href(['sweeps', s.id])}>{s.id}</a>
                  </td>
                  <td>
                    <StateBadge state={s.state} />
                  </td>
                  <td>{s.method}</td>
                  <td>{metricLabel(s.metric)}</td>
                  <td data-column="trials">
                    {s.trials.started} / {s.trials.total}
                  </td>
                  <td data-column="running">{s.trials.running}</td>
                  <td>
                    {s.project && <a href={href(['sweeps'], { project: s.project })}>{s.project}</a>}
                    {s.experiment && ` / ${s.experiment}`}
                  </td>
                  <td>
                    <When at={s.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
