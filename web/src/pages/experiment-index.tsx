/** Every project/experiment with its run counts over all runs (GET /runs/counts). */
import { api } from '../api.ts';
import { ErrorBox, Loading, When } from '../components.tsx';
import { useResource } from '../live.ts';
import { href } from '../router.ts';

export function ExperimentIndex() {
  // Counted by the server over every run, not over the newest page of them.
  const groups = useResource(() => api.runCounts(), [], { topics: ['runs'] });
  if (!groups.data) return groups.error ? <ErrorBox error={groups.error} /> : <Loading what="experiments" />;
  return (
    <>
      <h1>Experiments</h1>
      {groups.data.length === 0 && <p class="muted">No runs yet.</p>}
      <table>
        <thead>
          <tr>
            <th>project / experiment</th>
            <th>runs</th>
            <th>running</th>
            <th>latest</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {groups.data.map((g) => (
            <tr key={`${g.project}/${g.experiment ?? ''}`} data-experiment={`${g.project}/${g.experiment ?? ''}`}>
              <td>
                <a href={href(['experiments'], { project: g.project, experiment: g.experiment ?? '' })}>
                  {g.project} / {g.experiment ?? ''}
                </a>
              </td>
              <td>{g.runs}</td>
              <td>{g.running}</td>
              <td>
                <When at={g.latest} />
              </td>
              <td>
                <a href={href(['checkpoints'], { project: g.project, experiment: g.experiment ?? undefined })}>checkpoints</a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
