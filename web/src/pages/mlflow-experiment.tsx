/**
 * MLflow's "View experiment at" link (`/mlflow/#/experiments/<id>`, which the client prints beside
 * the run's): the MLflow experiment id is GPUPlane's experiment id ("0" is project default's
 * Default; domain/mlflow-names.ts), whose name MLflow's experiments/get answers as
 * `project/experiment`. The page looks it up and replaces itself with that experiment's page.
 */
import { useEffect, useState } from 'preact/hooks';
import { namesOf } from '../../../domain/mlflow-names.ts';
import { currentToken } from '../auth.ts';
import { Loading } from '../components.tsx';
import { href } from '../router.ts';

export function MlflowExperimentPage({ id }: { id: string }) {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    const token = currentToken();
    fetch(`/mlflow/api/2.0/mlflow/experiments/get?experiment_id=${encodeURIComponent(id)}`, { signal: abort.signal, headers: token ? { authorization: `Bearer ${token}` } : {} })
      .then(async (res) => {
        const body = (await res.json().catch(() => null)) as { experiment?: { name?: string }; message?: string } | null;
        const name = body?.experiment?.name;
        if (!res.ok || !name) throw new Error(body?.message ?? `MLflow experiment ${id}: ${res.status}`);
        const { project, experiment } = namesOf(name);
        // Replaced, not pushed: Back leaves for where the link was opened from.
        location.replace(href(['experiments'], { project, experiment }));
      })
      .catch((e: Error) => abort.signal.aborted || setError(e.message));
    return () => abort.abort();
  }, [id]);
  return error ? <p class="error">No experiment {id}: {error}</p> : <Loading what={`MLflow experiment ${id}`} />;
}
