/**
 * Every node with its labels and state, its peer witnesses (issue 46: who last heard it when, the
 * control plane's verdict when it is suspect or dead, and since when its agent is gone while its
 * peer keeper speaks for it); each card with the job that owns it (a gang's with this node's
 * rank), or free.
 */
import { useEffect, useRef } from 'preact/hooks';
import { useAction } from '../actions.ts';
import { api } from '../api.ts';
import { ErrorBox, JobLink, JobStateBadge, Loading, StateBadge, When } from '../components.tsx';
import { time } from '../format.ts';
import { rankOn } from '../gang.ts';
import { useLive, useResource } from '../live.ts';
import type { GpuNode, Job } from '../types.ts';

/** The peer witnesses' word on a node (docs/outage-rule.md, Peer witnesses), and whether its agent is gone, as `gpuctl nodes` prints them under WITNESSES. */
function Witnesses({ peer }: { peer: NonNullable<GpuNode['peer']> }) {
  const verdict = peer.verdict === 'dead' || peer.verdict === 'suspect' ? peer.verdict : null;
  return (
    <div class="peer" data-peer={peer.verdict ?? 'none'}>
      {verdict && (
        <p class="verdict" data-verdict={verdict}>
          <span class={`badge ${verdict === 'dead' ? 'state-LOST' : 'state-DRAINED'}`}>{verdict}</span> {peer.reason ?? ''}{' '}
          {peer.since && (
            <>
              (since <When at={peer.since} />)
            </>
          )}
        </p>
      )}
      {peer.agent_alive === false && (
        <p class="agent-gone" data-agent-gone title="its agent is gone (restarting); its peer keeper heartbeats and reports for the node while its attempts run">
          <span class="badge state-DRAINED">agent gone</span> {peer.agent_gone_since ? <When at={peer.agent_gone_since} /> : null}; its peer keeper speaks for the node
          {peer.reported_at && (
            <>
              {' '}
              (last report <When at={peer.reported_at} />)
            </>
          )}
        </p>
      )}
      <p class="witnesses muted">
        Witnesses:{' '}
        {peer.witnesses.length === 0
          ? 'none reporting'
          : peer.witnesses.map((w, i) => (
              <span key={w.node} class="witness" data-witness={w.node} title={`${w.node}'s report arrived ${time(w.reported_at)}`}>
                {i > 0 && ', '}
                {w.node} heard it <When at={w.last_heard_at} />
              </span>
            ))}
      </p>
    </div>
  );
}

function NodeCard({ node, jobs, focus, reload }: { node: GpuNode; jobs: Map<string, Job>; focus: boolean; reload: () => void }) {
  const busy = node.gpus.filter((g) => g.busy).length;
  const remove = useAction(reload);
  // A link to one node (a gang member's, from the job page) scrolls to it once.
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    if (focus) ref.current?.scrollIntoView({ block: 'nearest' });
  }, [focus]);
  return (
    <article ref={ref} class={`node node-${node.status}${node.drained ? ' drained' : ''}${focus ? ' focus' : ''}`} data-node={node.id}>
      <h3>
        {node.id} <StateBadge state={node.status} />
        {node.drained && (
          <>
            {' '}
            <span class="badge state-DRAINED" title={`drained by ${node.drained.by}`}>
              draining
            </span>
          </>
        )}
      </h3>
      {node.drained && (
        <p class="drain" data-drain>
          Takes no new jobs{node.drained.reason ? `: ${node.drained.reason}` : ''} (drained by {node.drained.by} <When at={node.drained.at} />; <code>gpuctl node resume {node.id}</code>)
        </p>
      )}
      <p class="muted">
        {node.hostname}{node.address ? ` · ${node.address}` : ''} · seen <When at={node.last_seen_at} /> · {busy}/{node.gpus.length} cards busy
      </p>
      {node.status === 'OFFLINE' && (
        <p class="remove">
          Gone for good?{' '}
          <button type="button" class="link" data-action="remove-node" onClick={() => window.confirm(`Remove node ${node.id}? An agent started again with its token registers it anew.`) && void remove.run(() => api.removeNode(node.id))}>
            remove it
          </button>{' '}
          (admins; <code>gpuctl node remove {node.id}</code>)
        </p>
      )}
      <ErrorBox error={remove.error} />
      {node.peer && <Witnesses peer={node.peer} />}
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
          const rank = job ? rankOn(job, node.id) : null;
          return (
            <li key={g.index} class={g.busy ? 'card busy' : 'card free'} data-card={g.index} title={`${g.name} · ${g.memory_mb} MB · ${g.uuid}`}>
              <span class="idx">GPU {g.index}</span>
              <span class="gname">{g.name}</span>
              {!g.present && <span class="badge state-LOST">missing</span>}
              {g.owner_job_id ? (
                <span class="owner">
                  <JobLink id={g.owner_job_id} />#{g.owner_attempt}
                  {rank !== null && (
                    <span class="rank" data-rank={rank} title={`this node is rank ${rank} of the job's ${job!.nodes} nodes`}>
                      {' '}
                      · rank {rank}
                    </span>
                  )}{' '}
                  {job && <JobStateBadge job={job} />}
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

/** `focus`: the node a link named (`#/cluster?node=ID`), marked and scrolled to. */
export function ClusterPage({ focus }: { focus: string | null }) {
  const nodes = useResource(() => api.nodes(), [], { topics: ['nodes'] });
  // A card's owner is dispatching or running, however old the job: ask for those states, not
  // for the newest jobs.
  const jobs = useResource(
    () => Promise.all((['DISPATCHING', 'RUNNING'] as const).map((state) => api.jobs({ state, limit: '1000' }))).then((l) => l.flat()),
    [],
    { topics: ['jobs'] },
  );
  // A running job's stall is an event of the job and a change of its attempt, not of its row.
  useLive({ topics: ['events'], jobId: (jobs.data ?? []).filter((j) => j.state === 'RUNNING').map((j) => j.id) }, jobs.reload);
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
            <NodeCard key={n.id} node={n} jobs={byId} focus={n.id === focus} reload={nodes.reload} />
          ))}
        </div>
      )}
    </>
  );
}
