/**
 * Code snapshots in the plane's store (docs/storage.md "Code snapshots"): one object per project
 * and hash, `code/<project id>/<sha256>.tar` (domain/code-snapshot.ts codeKey), so a hash named by
 * one project's job never reaches another's code. An upload is hashed as it is received and kept
 * only when it is the tar its hash names.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { codeKey, MAX_CODE_UPLOAD_BYTES, type CodeRef, type CodeSnapshot } from '../domain/code-snapshot.ts';
import type { ObjectInfo, ObjectStore } from '../runtime/object-store.ts';
import { DomainError } from './errors.ts';

/** The store, or a 409 that says there is none. */
export function codeStore(store: ObjectStore | null | undefined): ObjectStore {
  if (!store) throw new DomainError('conflict', "this API has no object store to keep code snapshots in (GPUPLANE_STORAGE)");
  return store;
}

/** The stored snapshot of a project (its id, or null for none), or null. */
export async function storedCode(store: ObjectStore, projectId: string | null, sha256: string): Promise<ObjectInfo | null> {
  return store.head(codeKey(projectId, sha256));
}

/**
 * A submit's, a sweep's, a retry's or a fork's `code`, as the job records it: the project's stored snapshot with that
 * hash. `project` names the project in the refusal (a 400: nothing is made).
 */
export async function resolveCode(store: ObjectStore | null | undefined, projectId: string | null | undefined, project: string | undefined, ref: CodeRef): Promise<CodeSnapshot> {
  const info = projectId === undefined ? null : await storedCode(codeStore(store), projectId, ref.sha256);
  const where = project ? `project ${project}` : 'the jobs of no project';
  const q = project ? `?project=${encodeURIComponent(project)}` : '';
  if (!info) throw new DomainError('invalid', `code: no snapshot ${ref.sha256} is uploaded for ${where} (PUT /api/v1/code/${ref.sha256}${q} first; gpuctl's --code does)`);
  return { sha256: ref.sha256, bytes: info.size, key: info.key, ...(ref.git ? { git: ref.git } : {}) };
}

/**
 * Refuses (409) a retry, fork or evaluation that would inherit a snapshot the store no longer
 * holds (code retention deletes what no job has used for GPUPLANE_CODE_KEEP_S, docs/storage.md):
 * said before anything is made, with what to do instead.
 */
export async function refuseDeletedCode(store: ObjectStore | null | undefined, code: CodeSnapshot | null | undefined, what: string): Promise<void> {
  if (!code || !store || (await store.head(code.key))) return;
  throw new DomainError('conflict', `${what} would run code snapshot ${code.sha256}, which is no longer in the store (code retention deletes a snapshot no job has used for GPUPLANE_CODE_KEEP_S): give the code again (--code DIR)`);
}

/**
 * Receives a snapshot's tar into a file of the API's temporary folder, hashing it and counting
 * its bytes, and puts it in the store under the project's key when its hash is `sha256`; a
 * body with another hash, or past MAX_CODE_UPLOAD_BYTES, is refused (400 / 413) and nothing is kept.
 */
export async function receiveCode(store: ObjectStore, projectId: string | null, sha256: string, body: Readable): Promise<ObjectInfo> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'gpuplane-code-'));
  const tmp = path.join(dir, `${randomBytes(6).toString('hex')}.tar`);
  const hash = createHash('sha256');
  let bytes = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (bytes > MAX_CODE_UPLOAD_BYTES) return cb(new DomainError('too_large', `the snapshot is larger than ${MAX_CODE_UPLOAD_BYTES} bytes, the most the API takes`));
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  try {
    await pipeline(body, count, fs.createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
    const got = hash.digest('hex');
    if (got !== sha256) throw new DomainError('invalid', `the body's sha256 is ${got}, not ${sha256}: nothing was kept`);
    if (bytes === 0) throw new DomainError('invalid', 'the body is empty: a snapshot is a tar');
    return await store.put(codeKey(projectId, sha256), { file: tmp });
  } finally {
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}
