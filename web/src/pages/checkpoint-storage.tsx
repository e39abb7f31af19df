/** A checkpoint's copy in the plane's object store (docs/storage.md): its state, and its files to save as a tar once stored. */
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorBox } from '../components.tsx';
import { bytes } from '../format.ts';
import { saveBlob } from '../save-file.ts';
import type { CheckpointDetail } from '../types.ts';

type Stored = Pick<CheckpointDetail, 'id' | 'storage' | 'storage_reason' | 'stored_bytes'>;

/** pending / stored / failed, as a badge with its reason; nothing where the plane keeps checkpoints only where they were written. */
export function StorageBadge({ c }: { c: Stored }) {
  if (c.storage === null) return null;
  const title = c.storage === 'failed' ? (c.storage_reason ?? '') : c.storage === 'pending' ? 'its node is uploading it to the store' : `in the store (${bytes(c.stored_bytes)})`;
  const cls = c.storage === 'stored' ? 'state-SUCCEEDED' : c.storage === 'failed' ? 'state-FAILED' : 'state-QUEUED';
  return (
    <span class={`badge ${cls}`} title={title} data-storage={c.storage}>
      {c.storage === 'failed' ? `not stored: ${c.storage_reason ?? ''}` : c.storage}
    </span>
  );
}

/** Saves a stored checkpoint's files as `<id>.tar` (through the API, with the project's read check). */
export function CheckpointDownload({ c }: { c: Stored }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  if (c.storage !== 'stored') return null;
  const save = async () => {
    setBusy(true);
    setError(null);
    try {
      saveBlob(await api.checkpointTar(c.id), `${c.id}.tar`);
    } catch (err) {
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button class="link plain" data-action="download-checkpoint" disabled={busy} onClick={() => void save()}>
        {busy ? 'downloading…' : `download (${bytes(c.stored_bytes)} tar)`}
      </button>
      <ErrorBox error={error} />
    </>
  );
}
