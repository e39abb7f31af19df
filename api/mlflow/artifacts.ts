/**
 * MLflow's proxied artifact endpoints (`/api/2.0/mlflow-artifacts/artifacts/…`): what
 * `mlflow.log_artifact`, `log_dict`, `log_text` and `log_figure` upload, and what
 * `download_artifacts` and `list_artifacts` read. A run's artifact_uri is
 * `mlflow-artifacts:/<experiment>/<run>/artifacts`; its files are kept under the API's artifact
 * folder (GPUPLANE_ARTIFACTS_DIR, default `<GPUPLANE_HOME>/artifacts`) as `<run id>/<path>`. A
 * logged model's (`mlflow-artifacts:/<experiment>/models/<model>/artifacts`, what `log_model`
 * uploads and `load_model` reads) are kept as `<model id>/<path>`, a trace's as `<trace id>/<path>`:
 * ids of the three never collide (`run-…`, `m-…`, `tr-…`).
 *
 * Paths are checked segment by segment (no `..`, `.`, empty segment, backslash or NUL), their
 * experiment id must be the run's (else 404, as for a run the caller may not read), and a file
 * is written to a temporary name and renamed, so a cut upload never leaves half a file.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { invalid, MlflowError, text, type Caller, type MlflowAuth } from './context.ts';
import { API } from './experiments.ts';
import { reachModel } from './models.ts';
import { modelArtifactUri, modelExperimentId } from './model-wire.ts';
import { reachRun } from './runs.ts';
import { artifactUri, mlflowExperimentId } from './wire.ts';

const ROOT = '/api/2.0/mlflow-artifacts/artifacts';
/** The largest file one upload may be: 5 GiB. */
const DEFAULT_MAX_BYTES = 5 * 1024 * 1024 * 1024;

export interface ArtifactOptions {
  /** Where the files live; null: artifacts are not served (NOT_IMPLEMENTED). */
  dir: string | null;
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

/** Lists one folder of an owner's artifacts as MLflow's FileInfo entries (half-written uploads left out). */
export async function listFolder(folder: string): Promise<{ path: string; is_dir: boolean; file_size?: number }[]> {
  const entries = await fs.promises.readdir(folder, { withFileTypes: true }).catch(() => []);
  const files = [];
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (/\.upload-[0-9a-f]{12}$/.test(e.name)) continue;
    if (e.isDirectory()) files.push({ path: e.name, is_dir: true });
    else if (e.isFile()) files.push({ path: e.name, is_dir: false, file_size: (await fs.promises.stat(path.join(folder, e.name))).size });
  }
  return files;
}

export function artifactRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth, opts: ArtifactOptions): void {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const dirOf = (runId: string) => {
    if (!opts.dir) throw new MlflowError('NOT_IMPLEMENTED', 'this API serves no artifacts (it was started without an artifact folder)');
    return path.join(opts.dir, runId);
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
      own = mlflowExperimentId(run.experimentId, run.projectName, run.experimentName);
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
    return { runId: id, rel, file: rel === '' ? dirOf(id) : path.join(dirOf(id), ...rel.split('/')) };
  };

  // MLflow 3's ListLoggedModelArtifacts: a model's files, listed by its id.
  app.get(`${API}/logged-models/:id/artifacts/directories`, async (req) => {
    const c = await auth.caller(req);
    const m = await reachModel(db, c, (req.params as { id: string }).id, false);
    const dir = text(req.query as Record<string, unknown>, 'artifact_directory_path');
    const own = modelExperimentId(m);
    const { file } = await target(req, `${own}/models/${m.id}/artifacts${dir ? `/${dir}` : ''}`, false);
    return { root_uri: modelArtifactUri(own, m.id), files: await listFolder(file) };
  });

  // Uploads are bytes, whatever their Content-Type says (a log_dict is application/json):
  // every body of this scope reaches the handler as the request's stream.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

  app.put(`${ROOT}/*`, async (req) => {
    const { rel, file } = await target(req, (req.params as { '*': string })['*'], true);
    if (rel === '') throw invalid('an upload names a file under the run\'s artifacts');
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.upload-${randomBytes(6).toString('hex')}`;
    let n = 0;
    const limit = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        n += chunk.length;
        if (n > maxBytes) cb(new MlflowError('INVALID_PARAMETER_VALUE', `the artifact is larger than ${maxBytes} bytes`));
        else cb(null, chunk);
      },
    });
    try {
      // An empty file has no body to parse: nothing reaches the handler.
      const body = (req.body as NodeJS.ReadableStream | undefined) ?? Readable.from([]);
      await pipeline(body, limit, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o640 }));
      await fs.promises.rename(tmp, file);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return {};
  });

  app.get(`${ROOT}/*`, async (req, reply) => {
    const { rel, file } = await target(req, (req.params as { '*': string })['*'], false);
    const st = rel === '' ? undefined : await fs.promises.lstat(file).catch(() => undefined);
    if (!st?.isFile()) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `no artifact ${rel || '(root)'} in this run`);
    return reply.header('content-type', 'application/octet-stream').header('content-length', st.size).send(fs.createReadStream(file));
  });

  app.get(ROOT, async (req) => {
    const q = req.query as Record<string, unknown>;
    const { file } = await target(req, text(q, 'path', true), false);
    const files = await listFolder(file);
    return { files };
  });
}
