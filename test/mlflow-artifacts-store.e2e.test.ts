/**
 * MLflow's artifacts in the plane's store (api/mlflow/artifact-files.ts): two real `gpuctl api`
 * processes on one database and one real S3 server (versitygw), and the real MLflow client. What
 * one replica received the other lists, downloads and deletes; the objects are in the bucket, not
 * in either replica's home; a cut upload leaves nothing.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { ListMultipartUploadsCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, parseStorage, type ObjectStore } from '../runtime/object-store.ts';
import { s3Client } from '../runtime/s3-client.ts';
import { startS3Server, versitygwBinary, type S3Server } from '../runtime/s3-server.ts';
import { DEFAULT_PART_SIZE } from '../runtime/s3-store.ts';
import { ManagedProcess, startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { mlflowFixtures } from './support/mlflow-client.ts';
import { freePort } from './support/ports.ts';
import { until } from './support/poll.ts';

let buildFailure: string | null = null;
try {
  versitygwBinary();
} catch (err) {
  buildFailure = (err as Error).message.split('\n')[0];
  console.warn(`test/mlflow-artifacts-store: SKIPPED: versitygw could not be built (${buildFailure})`);
}

const MiB = 1024 * 1024;
const BUCKET = 'mlart';
const ARTIFACTS = '/mlflow/api/2.0/mlflow-artifacts/artifacts';
const sha256 = (f: string) => createHash('sha256').update(fs.readFileSync(f)).digest('hex');
/** Every file under `root`, as its `/`-separated path and sha256. */
function hashes(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/')] = sha256(path.join(e.parentPath, e.name));
  }
  return out;
}

describe.skipIf(buildFailure !== null)('MLflow artifacts in the s3 store, through two API replicas', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-mlart-'));
  const src = path.join(tmp, 'src');
  let s3: S3Server;
  let c: Cluster;
  let replica2: ManagedProcess;
  let url2: string;
  let home2: string;
  let store: ObjectStore;

  /** The real MLflow client against `url` (a replica), as the admin. */
  const mlflow = (url: string, code: string, args: string[] = []) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PYTHONPATH: mlflowFixtures, PYTHONDONTWRITEBYTECODE: '1', MLFLOW_TRACKING_URI: `${url}/mlflow`, MLFLOW_TRACKING_TOKEN: c.token, MLFLOW_HTTP_REQUEST_MAX_RETRIES: '0' };
      execFile(examplesPython(), ['-c', code, ...args], { env, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`python: ${err.message}\n${stderr.slice(-3000)}`));
        else resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>);
      });
    });

  beforeAll(async () => {
    fs.mkdirSync(path.join(src, 'folder', 'sub'), { recursive: true });
    fs.mkdirSync(path.join(src, 'model'));
    // Bigger than a part: it goes to the bucket as a multipart upload.
    fs.writeFileSync(path.join(src, 'big.bin'), randomBytes(DEFAULT_PART_SIZE + 4 * MiB + 7));
    fs.writeFileSync(path.join(src, 'folder', 'a.txt'), 'alpha\n');
    fs.writeFileSync(path.join(src, 'folder', 'sub', 'b.json'), '{"b": 2}');
    fs.writeFileSync(path.join(src, 'folder', 'sub', 'empty.txt'), '');
    fs.writeFileSync(path.join(src, 'model', 'MLmodel'), 'flavors: {}\n');
    fs.writeFileSync(path.join(src, 'model', 'weights.bin'), randomBytes(64 * 1024));
    s3 = await startS3Server({ dir: path.join(tmp, 's3'), port: await freePort(), accessKeyId: 'mlart-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: [BUCKET], logFile: path.join(tmp, 's3.log') });
    c = await startCluster('mlart', { agents: [], env: { ...s3.env(), GPUPLANE_STORAGE: `s3://${BUCKET}/plane` } });
    // The second replica: the same database, Temporal and store; a home and a port of its own.
    home2 = fs.mkdtempSync(path.join(tmp, 'home2-'));
    const port2 = await freePort();
    url2 = `http://127.0.0.1:${port2}`;
    replica2 = new ManagedProcess('api 2', ['api'], { ...c.env, GPUPLANE_HOME: home2, GPUPLANE_API_PORT: String(port2), GPUPLANE_API_URL: url2 }, 'API listening');
    await replica2.start();
    store = await openStore(parseStorage(`s3://${BUCKET}/plane`), { home: tmp, env: s3.env() });
  });
  afterAll(async () => {
    await replica2?.kill('SIGTERM');
    await c?.stop();
    await store?.close();
    await s3?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('what replica 1 received, replica 2 lists, downloads (same bytes) and deletes; the objects are in the bucket', async () => {
    const logged = await mlflow(
      c.apiUrl,
      `
import json, sys, mlflow
from mlflow import MlflowClient
src = sys.argv[1]
mlflow.set_experiment("artifacts-in-store")
with mlflow.start_run() as run:
    mlflow.log_artifact(src + "/big.bin")
    mlflow.log_artifacts(src + "/folder", artifact_path="data")
c = MlflowClient()
m = c.create_logged_model(experiment_id=run.info.experiment_id, name="tiny")
c.log_model_artifacts(m.model_id, src + "/model")
print(json.dumps({"run": run.info.run_id, "uri": run.info.artifact_uri, "model": m.model_id, "model_uri": m.artifact_location}))`,
      [src],
    );
    const run = logged.run as string;
    const model = logged.model as string;

    const read = await mlflow(
      url2,
      `
import hashlib, json, os, sys, mlflow
from mlflow import MlflowClient
run, model, model_uri, dst = sys.argv[1:5]
c = MlflowClient()
def walk(p=None):
    out = []
    for f in c.list_artifacts(run, p):
        out.append([f.path, f.is_dir, f.file_size])
        if f.is_dir:
            out += walk(f.path)
    return out
mlflow.artifacts.download_artifacts(run_id=run, dst_path=dst + "/run")
mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=dst + "/model")
models = sorted(f.path for f in c.list_logged_model_artifacts(model))
print(json.dumps({"listing": walk(), "models": models}))`,
      [run, model, logged.model_uri as string, path.join(tmp, 'dl')],
    );
    expect(read.listing).toEqual([
      ['big.bin', false, DEFAULT_PART_SIZE + 4 * MiB + 7],
      ['data', true, null],
      ['data/a.txt', false, 6],
      ['data/sub', true, null],
      ['data/sub/b.json', false, 8],
      ['data/sub/empty.txt', false, 0],
    ]);
    expect(read.models).toEqual(['MLmodel', 'weights.bin']);
    expect(hashes(path.join(tmp, 'dl', 'run'))).toEqual({ 'big.bin': sha256(path.join(src, 'big.bin')), ...Object.fromEntries(Object.entries(hashes(path.join(src, 'folder'))).map(([k, v]) => [`data/${k}`, v])) });
    // download_artifacts of a URI keeps its last folder (`artifacts`).
    expect(hashes(path.join(tmp, 'dl', 'model', 'artifacts'))).toEqual(hashes(path.join(src, 'model')));

    // In the bucket, under the store's prefix, by owner id; in neither replica's home.
    expect((await store.list(`artifacts/${run}/`)).map((o) => o.key)).toEqual([`artifacts/${run}/big.bin`, `artifacts/${run}/data/a.txt`, `artifacts/${run}/data/sub/b.json`, `artifacts/${run}/data/sub/empty.txt`]);
    expect((await store.list(`artifacts/${model}/`)).map((o) => o.key)).toEqual([`artifacts/${model}/MLmodel`, `artifacts/${model}/weights.bin`]);
    for (const home of [c.home, home2]) {
      const folder = path.join(home, 'artifacts');
      expect(fs.existsSync(folder) ? fs.readdirSync(folder, { recursive: true }) : []).toEqual([]);
    }

    // MLflow's delete_artifacts through replica 2: replica 1 no longer lists them, nor does the bucket hold them.
    const after = await mlflow(
      url2,
      `
import json, sys, mlflow
from mlflow import MlflowClient
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
get_artifact_repository(sys.argv[1]).delete_artifacts("data/sub")
print(json.dumps({"ok": True}))`,
      [logged.uri as string],
    );
    expect(after.ok).toBe(true);
    const left = await mlflow(c.apiUrl, `import json, sys\nfrom mlflow import MlflowClient\nprint(json.dumps({"data": [f.path for f in MlflowClient().list_artifacts(sys.argv[1], "data")]}))`, [run]);
    expect(left.data).toEqual(['data/a.txt']);
    expect((await store.list(`artifacts/${run}/data/`)).map((o) => o.key)).toEqual([`artifacts/${run}/data/a.txt`]);

    // Bad input is a 400 of one line, another project's token a 404; the bucket is as it was.
    const exp = (logged.uri as string).split('/')[1];
    const put = (url: string, rel: string, token = c.token) => fetch(`${url}${ARTIFACTS}/${exp}/${run}/artifacts/${rel}`, { method: 'PUT', body: 'x', headers: { authorization: `Bearer ${token}` } });
    for (const [rel, says] of [
      ['big.bin/inside.txt', /big\.bin is a file, not a folder/],
      ['data', /it is a folder of artifacts/],
      ['.gpuplane-x', /uses a name the store keeps for itself/],
    ] as const) {
      const r = await put(url2, rel);
      const body = (await r.json()) as { message: string };
      expect(r.status, rel).toBe(400);
      expect(body.message).toMatch(says);
      expect(body.message).not.toContain('\n');
    }
    const other = await c.makeToken({ role: 'member', projects: ['elsewhere'] });
    expect((await fetch(`${url2}${ARTIFACTS}/${exp}/${run}/artifacts/big.bin`, { headers: { authorization: `Bearer ${other.token}` } })).status).toBe(404);
    expect((await put(url2, 'sneaky.txt', other.token)).status).toBe(404);
    expect((await store.list(`artifacts/${run}/`)).length).toBe(2);
  });

  it('an upload cut off midway leaves no object and no unfinished multipart upload', async () => {
    const made = await mlflow(c.apiUrl, `import json, mlflow\nmlflow.set_experiment("cut")\nwith mlflow.start_run() as r: pass\nprint(json.dumps({"uri": r.info.artifact_uri}))`);
    const [, exp, run] = (made.uri as string).split('/');
    const s3c = s3Client({ endpoint: s3.endpoint, region: s3.region, credentials: { accessKeyId: s3.env().AWS_ACCESS_KEY_ID, secretAccessKey: s3.env().AWS_SECRET_ACCESS_KEY } });
    const uploads = async () => (await s3c.send(new ListMultipartUploadsCommand({ Bucket: BUCKET, Prefix: `plane/artifacts/${run}/` }))).Uploads ?? [];
    try {
      // A part and a MiB sent of a part and two announced: the store has begun a multipart upload when the client goes.
      const req = http.request(`${url2}${ARTIFACTS}/${exp}/${run}/artifacts/cut.bin`, { method: 'PUT', headers: { authorization: `Bearer ${c.token}`, 'content-length': String(DEFAULT_PART_SIZE + 2 * MiB) } });
      req.on('error', () => {});
      req.write(randomBytes(DEFAULT_PART_SIZE + MiB));
      await until('the multipart upload begun', async () => (await uploads()).length > 0, 30_000);
      req.destroy();
      await until('the multipart upload aborted', async () => (await uploads()).length === 0, 30_000);
      expect(await store.list(`artifacts/${run}/`)).toEqual([]);
      const listed = await fetch(`${c.apiUrl}${ARTIFACTS}?path=${exp}/${run}/artifacts`, { headers: c.auth });
      expect(await listed.json()).toEqual({ files: [] });
    } finally {
      s3c.destroy();
    }
  });
});
