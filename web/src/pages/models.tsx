/**
 * The Models page: the registered models the token may read (MLflow's registry, served under
 * /mlflow; api/mlflow/registry*.ts), each with its aliases and versions. A version links back to
 * its run, and a promoted checkpoint's version to the checkpoint and the evaluation that justified
 * it (the gpuplane.* tags POST /checkpoints/:id/register records). Read from the MLflow endpoints
 * with the console's token (api.mlflow: a 401 signs the page out, as every call): the registry has
 * no /api/v1 read of its own to keep in step.
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorBox, Loading, RunLink, Section } from '../components.tsx';
import { href } from '../router.ts';

type Tag = { key: string; value: string };
interface Version {
  name: string;
  version: string;
  current_stage: string;
  source: string;
  run_id?: string;
  aliases?: string[];
  tags?: Tag[];
  creation_timestamp: number;
}
interface Model {
  name: string;
  description?: string;
  aliases?: { alias: string; version: string }[];
}

function VersionRow({ v }: { v: Version }) {
  const tags = Object.fromEntries((v.tags ?? []).map((t) => [t.key, t.value]));
  const ckpt = tags['gpuplane.checkpoint_id'];
  const why = tags['gpuplane.metric'] ? `${tags['gpuplane.metric']} = ${tags['gpuplane.metric_value']} (${tags['gpuplane.metric_source']}, ${tags['gpuplane.metric_level']} metric)` : '';
  return (
    <tr data-version={v.version}>
      <td>{v.version}</td>
      <td>{v.current_stage}</td>
      <td>{(v.aliases ?? []).join(', ')}</td>
      <td>
        <RunLink id={v.run_id ?? null} />
      </td>
      <td>{ckpt ? <a href={href(['checkpoints'], { run: v.run_id, id: ckpt })}>{ckpt}</a> : <code>{v.source}</code>}</td>
      <td>
        {why}
        {tags['gpuplane.evaluation_id'] ? ` · ${tags['gpuplane.evaluation_id']}` : ''}
      </td>
    </tr>
  );
}

export function ModelsPage() {
  const [data, setData] = useState<{ models: Model[]; versions: Version[] } | null>(null);
  const [error, setError] = useState<Error | null>(null);
  useEffect(() => {
    Promise.all([api.mlflow<{ registered_models?: Model[] }>('registered-models/search?max_results=1000'), api.mlflow<{ model_versions?: Version[] }>('model-versions/search?max_results=10000')])
      .then(([m, v]) => setData({ models: m.registered_models ?? [], versions: v.model_versions ?? [] }))
      .catch((e: Error) => setError(e));
  }, []);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading what="registered models" />;
  if (data.models.length === 0) return <p class="empty">No registered models. Register one with mlflow.register_model, or the evaluated best with gpuctl best --register NAME --alias champion.</p>;
  return (
    <>
      {data.models.map((m) => (
        <Section key={m.name} title={m.name}>
          {m.description && <p>{m.description}</p>}
          <p>Aliases: {(m.aliases ?? []).map((a) => `${a.alias} → ${a.version}`).join(', ') || 'none'}</p>
          <table class="models">
            <thead>
              <tr>
                <th>VERSION</th>
                <th>STAGE</th>
                <th>ALIASES</th>
                <th>RUN</th>
                <th>CHECKPOINT / SOURCE</th>
                <th>JUSTIFIED BY</th>
              </tr>
            </thead>
            <tbody>
              {data.versions
                .filter((v) => v.name === m.name)
                .map((v) => (
                  <VersionRow key={v.version} v={v} />
                ))}
            </tbody>
          </table>
        </Section>
      ))}
    </>
  );
}
