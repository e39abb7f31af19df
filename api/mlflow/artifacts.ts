/**
 * MLflow's proxied artifact endpoints (`/api/2.0/mlflow-artifacts/artifacts/…`): what
 * `mlflow.log_artifact`, `log_dict`, `log_text` and `log_figure` upload, what
 * `download_artifacts` and `list_artifacts` read, and what an artifact repository's
 * `delete_artifacts` removes. A run's artifact_uri is `mlflow-artifacts:/<experiment>/<run>/artifacts`;
 * a logged model's `mlflow-artifacts:/<experiment>/models/<model>/artifacts` (what `log_model`
 * uploads and `load_model` reads), a trace's `…/traces/<trace>/artifacts`. Their files are kept by
 * owner id (./artifact-files.ts): in the plane's store where it is shared by every API replica,
 * else in the API's artifact folder (GPUPLANE_ARTIFACTS_DIR, default `<GPUPLANE_HOME>/artifacts`).
 *
 * Paths are checked segment by segment (no `..`, `.`, empty segment, backslash or NUL), their
 * experiment id must be the owner's (else 404, as for a run the caller may not read), and a file
 * appears whole or not at all, so a cut upload never leaves half a file.
 */
import { pipeline, Readable, Transform } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { invalid, MlflowError, text, type Caller, type MlflowAuth } from './context.ts';
import { emptyBody, type ArtifactFiles } from './artifact-files.ts';
import { API } from './experiments.ts';
import { reachModel } from './models.ts';
import { modelArtifactUri, modelExperimentId } from './model-wire.ts';
import { reachRun } from './runs.ts';
import { artifactUri, DEFAULT_EXPERIMENT_ID, mlflowExperimentId } from './wire.ts';

const ROOT = '/api/2.0/mlflow-artifacts/artifacts';
/** The largest file one upload may be: 5 GiB. */
const DEFAULT_MAX_BYTES = 5 * 1024 * 1024 * 1024;

export interface ArtifactOptions {
  /** Where the files live (./artifact-files.ts); null: artifacts are not served (NOT_IMPLEMENTED). */
  files: ArtifactFiles | null;
  maxBytes?: number;
  /** The MLflow experiment id of a trace the caller may reach (./traces.ts); absent: traces have no files here. */
  reachTrace?: (c: Caller, id: string, write: boolean) => Promise<string>;
}

/** Whose files a path names: a run's, a logged model's (`models/<id>`) or a trace's (`traces/<id>`). */
export type ArtifactOwner = 'run' | 'model' | 'trace';

/**
 * `<experiment>/<run>/artifacts[/<path>]`, `<experiment>/models/<model>/artifacts[/<path>]` or
 * `<experiment>/traces/<trace>/artifacts[/<path>]` as the experiment, the owner and the path inside
 * its artifacts ('' for the root).
 */
export function artifactPath(p: string): { experimentId: string; owner: ArtifactOwner; id: string; rel: string } {
  const parts = p.split('/').filter((s, i, all) => !(s === '' && (i === 0 || i === all.length - 1)));
  const nested = parts[1] === 'models' || parts[1] === 'traces';
  const at = nested ? 3 : 2;
  if (parts.length < at + 1 || parts[at] !== 'artifacts') throw invalid(`an artifact path is <experiment id>/<run id>/artifacts/<path> (or <experiment id>/models/<model id>/artifacts/<path>), got "${p.slice(0, 200)}"`);
  const rel = parts.slice(at + 1);
  for (const seg of [...parts.slice(0, at), ...rel]) {
    if (seg === '' || seg === '.' || seg === '..' || /[\\\0]/.test(seg) || seg.length > 255) throw invalid(`invalid artifact path "${p.slice(0, 200)}": no empty, "." or ".." segments, backslashes or NUL`);
  }
  const owner: ArtifactOwner = parts[1] === 'models' ? 'model' : parts[1] === 'traces' ? 'trace' : 'run';
  return { experimentId: parts[0], owner, id: nested ? parts[2] : parts[1], rel: rel.join('/') };
}

/**
 * The upload's bytes, counted: past `maxBytes`, or ending short of the Content-Length the client
 * announced (a cut connection), the stream errs, so the store never publishes the object.
 */
function countedBody(req: FastifyRequest, maxBytes: number): { body: Readable; tooLarge: () => boolean } {
  const announced = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
  let n = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      n += chunk.length;
      if (n > maxBytes) cb(new MlflowError('INVALID_PARAMETER_VALUE', `the artifact is larger than ${maxBytes} bytes`));
      else cb(null, chunk);
    },
    flush(cb) {
      if (announced !== undefined && Number.isFinite(announced) && n !== announced) cb(new MlflowError('INVALID_PARAMETER_VALUE', `the upload ended after ${n} of its ${announced} bytes`));
      else cb();
    },
  });
  // An empty file has no body to parse: nothing reaches the handler.
  const source = (req.body as Readable | undefined) ?? emptyBody();
  // The callback form destroys `limit` with the source's error (a client gone midway), which the store sees.
  return { body: pipeline(source, limit, () => {}), tooLarge: () => n > maxBytes };
}

export function artifactRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth, opts: ArtifactOptions): void {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const filesOf = () => {
    if (!opts.files) throw new MlflowError('NOT_IMPLEMENTED', 'this API serves no artifacts (it was started without an artifact folder or a shared store)');
    return opts.files;
  };
  const target = async (req: FastifyRequest, p: string, write: boolean) => {
    const c = await auth.caller(req);
    const { experimentId, owner, id, rel } = artifactPath(p);
    // Files are kept by owner id alone: a path must name the owner's own experiment, as its
    // artifact URI does, or a write would land in an owner the path does not say.
    let own: string;
    let uri: string;
    if (owner === 'run') {
      const run = await reachRun(db, c, id, write);
      // A run in no experiment has its artifacts under "0" (wire.ts artifactUri).
      own = mlflowExperimentId(run.experimentId, run.projectName, run.experimentName) || DEFAULT_EXPERIMENT_ID;
      uri = artifactUri(own, id);
    } else if (owner === 'model') {
      own = modelExperimentId(await reachModel(db, c, id, write));
      uri = modelArtifactUri(own, id);
    } else {
      if (!opts.reachTrace) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Trace with ID '${id}' not found.`);
      own = await opts.reachTrace(c, id, write);
      uri = `mlflow-artifacts:/${own}/traces/${id}/artifacts`;
    }
    if (experimentId !== own) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `${owner} ${id} is not in experiment ${experimentId.slice(0, 100)}: its artifacts are under ${uri}`);
    return { files: filesOf(), id, rel };
  };
  const pathOf = (req: FastifyRequest) => (req.params as { '*': string })['*'];

  // MLflow 3's ListLoggedModelArtifacts: a model's files, listed by its id.
  app.get(`${API}/logged-models/:id/artifacts/directories`, async (req) => {
    const c = await auth.caller(req);
    const m = await reachModel(db, c, (req.params as { id: string }).id, false);
    const dir = text(req.query as Record<string, unknown>, 'artifact_directory_path');
    const own = modelExperimentId(m);
    const { files, id, rel } = await target(req, `${own}/models/${m.id}/artifacts${dir ? `/${dir}` : ''}`, false);
    return { root_uri: modelArtifactUri(own, m.id), files: await files.list(id, rel) };
  });

  // Uploads are bytes, whatever their Content-Type says (a log_dict is application/json):
  // every body of this scope reaches the handler as the request's stream.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

  app.put(`${ROOT}/*`, async (req) => {
    const { files, id, rel } = await target(req, pathOf(req), true);
    if (rel === '') throw invalid("an upload names a file under the run's artifacts");
    const { body, tooLarge } = countedBody(req, maxBytes);
    try {
      await files.write(id, rel, body);
    } catch (err) {
      // The store may wrap what the stream threw: the line the client reads is ours.
      if (tooLarge()) throw new MlflowError('INVALID_PARAMETER_VALUE', `the artifact is larger than ${maxBytes} bytes`);
      throw err;
    }
    return {};
  });

  app.get(`${ROOT}/*`, async (req, reply) => {
    const { files, id, rel } = await target(req, pathOf(req), false);
    const file = await files.read(id, rel);
    if (!file) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `no artifact ${rel || '(root)'} in this run`);
    return reply.header('content-type', 'application/octet-stream').header('content-length', file.size).send(file.body);
  });

  // MLflow's DeleteArtifact: a file, or a folder with everything under it.
  app.delete(`${ROOT}/*`, async (req) => {
    const { files, id, rel } = await target(req, pathOf(req), true);
    await files.remove(id, rel);
    return {};
  });

  app.get(ROOT, async (req) => {
    const q = req.query as Record<string, unknown>;
    const { files, id, rel } = await target(req, text(q, 'path', true), false);
    return { files: await files.list(id, rel) };
  });
}
