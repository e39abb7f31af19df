/** What a page's action buttons share: the Temporal UI's link to a workflow, and a call whose failure the page shows. */
import { useState } from 'preact/hooks';
import { api } from './api.ts';
import { useResource } from './live.ts';

/** The Temporal UI's page of workflow `workflowId` (job/<id>, sweep/<id>), or null when the plane names no Temporal UI. */
export function useWorkflowUrl(workflowId: string): string | null {
  const info = useResource(() => api.info(), [], { topics: [] });
  const tui = info.data?.temporal_ui;
  return tui ? `${tui.replace(/\/$/, '')}/namespaces/${encodeURIComponent(info.data?.namespace ?? 'default')}/workflows/${encodeURIComponent(workflowId)}` : null;
}

/** An action (Cancel, say): `run(call)` awaits it and then `reload`; `error` is its failure until the next try. */
export function useAction(reload: () => void): { run: (call: () => Promise<unknown>) => Promise<void>; error: Error | null } {
  const [error, setError] = useState<Error | null>(null);
  const run = async (call: () => Promise<unknown>) => {
    setError(null);
    try {
      await call();
      reload();
    } catch (err) {
      setError(err as Error);
    }
  };
  return { run, error };
}
