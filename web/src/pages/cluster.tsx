/** Every node with its labels and state; each card with the job that owns it, or free. */
import { api } from '../api.ts';
import { ErrorBox, JobLink, Loading, StateBadge, When } from '../components.tsx';
import { useResource } from '../live.ts';
import type { GpuNode, Job } from '../types.ts';

function NodeCard({ node, jobs }: { node: GpuNode; jobs: Map<string, Job> }) {
  const busy = node.gpus.filter((g) => g.busy).length;
  return (
    <article class={`node node-${node.status}`} data-node={node.id}>
      <h3>
        {node.id} <StateBadge state={node.status} />
      </h3>
      <p class="muted">
        {node.hostname}{node.address ? ` · ${node.address}` : ''} · seen <When at={node.last_seen_at} /> · {busy}/{node.gpus.length} cards busy
      </p>
      <p class="labels">
        {Object.entries(node.labels).map(([k, v]) => (
          <span key={k} class="label">
            {k}={v}
          </span>
        ))}
      </p>
      <ul class="cards">
        {node.gpus.map((g) => {
          const job = g.owner_job_id ? jobs.get(g.owner_job_id) : undefined;
          return (
            <li key={g.index} class={g.busy ? 'card busy' : 'card free'} data-card={g.index} title={`${g.name} · ${g.memory_mb} MB · ${g.uuid}`}>
              <span class="idx">GPU {g.index}</span>
              <span class="gname">{g.name}</span>
              {!g.present && <span class="badge state-LOST">missing</span>}
              {g.owner_job_id ? (
                <span class="owner">
                  <JobLink id={g.owner_job_id} />#{g.owner_attempt} {job && <StateBadge state={job.state} />}
                </span>
              ) : g.busy ? (
                <span class="owner muted">busy (another project's job)</span>
              ) : (
                <span class="owner muted">free</span>
              )}
            </li>
          );
        })}
      </ul>
    </article>
  );
}

export function ClusterPage() {
  const nodes = useResource(() => api.nodes(), [], { topics: ['nodes'] });
  // A card's owner is dispatching or running, however old the job: ask for those states, not
  // for the newest jobs.
  const jobs = useResource(
    () => Promise.all((['DISPATCHING', 'RUNNING'] as const).map((state) => api.jobs({ state, limit: '1000' }))).then((l) => l.flat()),
    [],
    { topics: ['jobs'] },
  );
  const byId = new Map((jobs.data ?? []).map((j) => [j.id, j]));
  return (
    <>
      <h1>Cluster</h1>
      <ErrorBox error={nodes.error} />
      {!nodes.data ? (
        !nodes.error && <Loading what="nodes" />
      ) : nodes.data.length === 0 ? (
        <p class="muted">No nodes yet: start one with gpuctl agent.</p>
      ) : (
        <div class="grid">
          {nodes.data.map((n) => (
            <NodeCard key={n.id} node={n} jobs={byId} />
          ))}
        </div>
      )}
    </>
  );
}
