/**
 * The fork tree that holds a checkpoint (GET /lineage?checkpoint=…), drawn as `gpuctl lineage`
 * prints it: each run under the checkpoint it forked from, with the step, the config diff at the
 * branch and the run's own checkpoints (the page's one highlighted, those retention deleted marked).
 */
import { api } from '../api.ts';
import { ErrorBox, Loading, RunLink, StateBadge } from '../components.tsx';
import { show } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import { treeOf, type LineageNode } from '../lineage-tree.ts';

function CheckpointLink({ id, runId, step, current, deleted }: { id: string; runId: string; step?: number | null; current: string; deleted?: boolean }) {
  const cls = ['ckpt', id === current ? 'current' : '', deleted ? 'deleted' : ''].filter(Boolean).join(' ');
  return (
    <a
      href={href(['checkpoints'], { run: runId, id })}
      class={cls}
      data-checkpoint={id}
      data-deleted={deleted ? 'true' : undefined}
      aria-current={id === current ? 'true' : undefined}
      title={deleted ? 'its files were deleted by retention: it can no longer be forked' : undefined}
    >
      {id}
      {step !== undefined && step !== null && `@${step}`}
      {deleted && ' (deleted)'}
    </a>
  );
}

function RunNode({ node, current }: { node: LineageNode; current: string }) {
  const r = node.run;
  const from = r.forked_from;
  const where = [r.project, r.experiment].filter(Boolean).join('/');
  return (
    <li data-lineage-run={r.id} data-depth={r.depth} data-fork-step={from?.step ?? undefined}>
      <div class="lineage-run">
        {from && (
          <span class="fork-point">
            forked from <CheckpointLink id={from.checkpoint_id} runId={from.run_id} current={current} /> @ step {from.step ?? '?'}:{' '}
          </span>
        )}
        run <RunLink id={r.id} label={r.name ?? r.id} /> <StateBadge state={r.status} />
        {r.job_id && (
          <>
            {' '}
            job <a href={href(['jobs', r.job_id])}>{`${r.job_id}#${r.attempt ?? '?'}`}</a>
          </>
        )}
        {where && (
          <>
            {' '}
            <a class="muted" href={href(['experiments'], { project: r.project ?? undefined, experiment: r.experiment ?? undefined })}>
              ({where})
            </a>
          </>
        )}
      </div>
      {r.changes.length > 0 && (
        <div class="diff" data-testid="changes">
          changes:{' '}
          {r.changes.map((c, i) => (
            <span key={c.key} data-change={c.key}>
              {i > 0 && ', '}
              <code>{c.key}</code> <del>{c.from === null ? 'not given' : show(c.from)}</del>
              {c.run_logged !== undefined && (c.from === null || String(c.run_logged) !== String(c.from)) && <span class="muted"> (run logged {show(c.run_logged)})</span>} → <ins>{show(c.to)}</ins>
            </span>
          ))}
        </div>
      )}
      <div class="lineage-checkpoints">
        checkpoints:{' '}
        {r.checkpoints.length === 0 ? (
          <span class="muted">none</span>
        ) : (
          r.checkpoints.map((c) => (
            <span key={c.id}>
              <CheckpointLink id={c.id} runId={r.id} step={c.step} current={current} deleted={c.deleted_at !== null} />{' '}
            </span>
          ))
        )}
      </div>
      {node.forks.length > 0 && (
        <ul>
          {node.forks.map((f) => (
            <RunNode key={f.run.id} node={f} current={current} />
          ))}
        </ul>
      )}
    </li>
  );
}

/** The lineage section of a checkpoint's page: live, as runs end and checkpoints are registered. */
export function CheckpointLineage({ id }: { id: string }) {
  const l = useResource(() => api.lineage({ checkpoint: id }), [id], { topics: ['checkpoints', 'runs'] });
  if (!l.data) return l.error ? <ErrorBox error={l.error} /> : <Loading what="lineage" />;
  return (
    <>
      <ul class="lineage" data-testid="lineage" data-root={l.data.root_run_id}>
        {treeOf(l.data.runs).map((n) => (
          <RunNode key={n.run.id} node={n} current={id} />
        ))}
      </ul>
      {l.data.runs.length === 1 && <p class="muted">no forks yet: `gpuctl fork {id}` branches a run from this checkpoint</p>}
    </>
  );
}
