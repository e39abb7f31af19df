/**
 * A run's artifacts (what MLflow's log_artifact, log_dict, log_text and log_figure uploaded,
 * api/mlflow/artifacts.ts), a folder at a time: each file with its size and a download, images
 * shown as images and small text files as text.
 *
 * The files are read with the token in the Authorization header, like every other call, so no
 * link or <img> can point at them: the page fetches the bytes, shows an image from a data: URL
 * (which the CSP's img-src allows, api/auth/security-headers.ts) and saves a download from a blob: URL
 * of type application/octet-stream. Text goes into a <pre> as text, never parsed as HTML; an SVG
 * is shown only through <img>, where its scripts do not run.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { saveBlob } from '../save-file.ts';
import { artifactRoot, OPEN_PREVIEWS, previewOf, type Preview } from '../artifacts.ts';
import { ErrorBox, Loading, Section } from '../components.tsx';
import { bytes } from '../format.ts';
import { useResource } from '../live.ts';
import type { ArtifactFile, RunDetail } from '../types.ts';

type Loaded = { url?: string; text?: string; error?: Error };

/** A blob as a data: URL of `type`. */
const dataUrl = (blob: Blob, type: string) =>
  new Promise<string>((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result as string);
    r.onerror = () => reject(r.error ?? new Error('could not read the file'));
    r.readAsDataURL(new Blob([blob], { type }));
  });

/**
 * A file's bytes shown in the page: an image, or its text. Images are data: URLs, not blob: ones:
 * a blob: URL is of the console's origin, so an SVG's script would run there, token in reach,
 * were the image opened in a tab of its own; a data: document has an origin of its own.
 */
function Shown({ file, name, preview, size }: { file: string; name: string; preview: Exclude<Preview, null>; size: number }) {
  const [state, setState] = useState<Loaded>({});
  useEffect(() => {
    if (preview.kind === 'too-large') return;
    const ctrl = new AbortController();
    api
      .artifact(file, ctrl.signal)
      // The type comes from the extension, not the server (which sends every file as bytes).
      .then((blob): Promise<Loaded> => (preview.kind === 'image' ? dataUrl(blob, preview.type).then((url) => ({ url })) : blob.text().then((text) => ({ text }))))
      .then(
        (s) => !ctrl.signal.aborted && setState(s),
        (error: Error) => !ctrl.signal.aborted && setState({ error }),
      );
    return () => ctrl.abort();
  }, [file, size]);
  if (preview.kind === 'too-large') return <p class="muted">too large to show here (over {bytes(preview.max)}): download it</p>;
  if (state.error) return <ErrorBox error={state.error} />;
  if (state.url) return <img class="artifact-image" src={state.url} alt={name} />;
  if (state.text !== undefined) return <pre class="artifact-text">{state.text}</pre>;
  return <Loading what={name} />;
}

/** Saves a file: fetched with the token, then handed to the browser as bytes to save, never to open. */
function Download({ file, name }: { file: string; name: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  const save = async () => {
    setBusy(true);
    setError(null);
    try {
      saveBlob(await api.artifact(file), name);
    } catch (e) {
      setError(e as Error);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button class="link plain" data-download={name} disabled={busy} onClick={() => void save()}>
        {busy ? 'downloading…' : 'download'}
      </button>
      <ErrorBox error={error} />
    </>
  );
}

function Listing({ root, dir, files, open }: { root: string; dir: string[]; files: ArtifactFile[]; open: (name: string) => void }) {
  const [shown, setShown] = useState<Set<string>>(new Set());
  const sorted = [...files.filter((f) => f.is_dir), ...files.filter((f) => !f.is_dir)];
  let previews = 0;
  return (
    <table class="artifacts">
      <tbody>
        {sorted.map((f) => {
          const rel = [...dir, f.path].join('/');
          if (f.is_dir) {
            return (
              <tr key={rel} data-artifact={rel} data-dir="">
                <td colSpan={3}>
                  <button class="link plain folder" onClick={() => open(f.path)}>
                    {f.path}/
                  </button>
                </td>
              </tr>
            );
          }
          const size = f.file_size ?? 0;
          const preview = previewOf(f.path, size);
          const visible = preview !== null && (preview.kind === 'too-large' || previews++ < OPEN_PREVIEWS || shown.has(rel));
          return (
            <tr key={rel} data-artifact={rel}>
              <td>
                <code>{f.path}</code>
                {preview && !visible && (
                  <>
                    {' '}
                    <button class="link plain" onClick={() => setShown(new Set(shown).add(rel))}>
                      show
                    </button>
                  </>
                )}
                {visible && preview && (
                  <div class="artifact-preview">
                    <Shown file={`${root}/${rel}`} name={f.path} preview={preview} size={size} />
                  </div>
                )}
              </td>
              <td class="size">{bytes(size)}</td>
              <td>
                <Download file={`${root}/${rel}`} name={f.path} />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** The Artifacts section of a run's page (key it by the run: the folder open is per run). */
export function RunArtifacts({ run }: { run: Pick<RunDetail, 'id' | 'experiment_id' | 'project' | 'experiment'> }) {
  const root = artifactRoot(run);
  const [dir, setDir] = useState<string[]>([]);
  const at = [root, ...dir].join('/');
  // Uploads make no change event: the list is read again when the run changes (it ends, most
  // often just after its last upload) and on *refresh*.
  const list = useResource(() => api.artifacts(at), [at], { topics: ['runs'], runId: run.id });
  const files = list.data;
  return (
    <Section
      title="Artifacts"
      actions={
        <button class="link plain" data-action="refresh-artifacts" onClick={list.reload}>
          refresh
        </button>
      }
    >
      <nav class="crumbs" aria-label="artifact folder">
        <button class="link plain" onClick={() => setDir([])}>
          artifacts
        </button>
        {dir.map((d, i) => (
          <span key={i}>
            {' / '}
            <button class="link plain" onClick={() => setDir(dir.slice(0, i + 1))}>
              {d}
            </button>
          </span>
        ))}
      </nav>
      <ErrorBox error={list.error} />
      {!files ? (
        !list.error && <Loading what="artifacts" />
      ) : files.length === 0 ? (
        <p class="muted">{dir.length ? 'empty folder' : 'no artifacts'}</p>
      ) : (
        <Listing key={at} root={root} dir={dir} files={files} open={(name) => setDir([...dir, name])} />
      )}
    </Section>
  );
}
