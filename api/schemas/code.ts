/** A job's code snapshot as the API takes it (a hash) and shows it (domain/code-snapshot.ts). */
import { Type } from '@sinclair/typebox';
import { GIT_COMMIT, SHA256_HEX } from '../../domain/code-snapshot.ts';

const Git = Type.Object(
  {
    commit: Type.String({ pattern: GIT_COMMIT, description: "the checkout's HEAD commit" }),
    dirty: Type.Boolean({ description: 'whether files differed from that commit (changed, added or removed, ignored files aside)' }),
  },
  { additionalProperties: false, description: 'the folder was a git checkout' },
);

export const Sha256 = Type.String({ pattern: SHA256_HEX, description: "sha256 of the snapshot's tar, 64 lowercase hex digits" });

/** What a submit or a sweep names: a snapshot already uploaded to its project (PUT /code/{sha256}). */
export const CodeRefSchema = Type.Object(
  { sha256: Sha256, git: Type.Optional(Git) },
  {
    additionalProperties: false,
    description:
      "the code the job runs (`gpuctl submit --code DIR`): a tar uploaded to the job's project first (PUT /code/{sha256}?project=), which every node unpacks into a working dir of the job's own. Not with working_dir; inherited by its retries, forks and evaluations",
  },
);

export const CodeSnapshotSchema = Type.Object({
  sha256: Sha256,
  bytes: Type.Integer({ minimum: 0, description: "the tar's size" }),
  key: Type.String({ description: "the object's key in the plane's store" }),
  git: Type.Optional(Git),
});

export const CodeQuery = Type.Object(
  { project: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "the project the snapshot is kept for; none: the jobs of no project's" })) },
  { additionalProperties: false },
);

export const CodeParams = Type.Object({ sha256: Sha256 });

export const CodeInfoSchema = Type.Object({
  sha256: Sha256,
  bytes: Type.Integer({ minimum: 0 }),
  key: Type.String({ description: "the object's key in the plane's store" }),
});
