/** A job's Python environment as the API takes it (the file's text) and shows it (domain/python-env.ts). */
import { Type } from '@sinclair/typebox';
import { MAX_REQUIREMENTS_BYTES } from '../../domain/python-env.ts';
import { SHA256_HEX } from '../../domain/code-snapshot.ts';

/** What a submit, a retry or a fork gives: a requirements.txt's text (pyproject.toml with uv.lock, and pylock.toml, are not taken yet). */
export const PythonEnvBodySchema = Type.Object(
  {
    requirements: Type.String({
      minLength: 1,
      maxLength: MAX_REQUIREMENTS_BYTES,
      description: "a requirements.txt's text: packages and versions, no options (the node's package index is its agent's)",
    }),
  },
  {
    additionalProperties: false,
    description:
      "the Python environment the job runs in (`gpuctl submit --python-env FILE`): each node builds it with uv once per content, Python version and platform, into a cache shared read-only by the jobs that need it; the process gets its bin first on PATH and VIRTUAL_ENV. Inherited by its retries, forks and evaluations",
  },
);

export const PythonEnvSchema = Type.Object({
  kind: Type.Literal('requirements'),
  sha256: Type.String({ pattern: SHA256_HEX, description: "sha256 of the file's text (UTF-8)" }),
  bytes: Type.Integer({ minimum: 0, description: "the file's size" }),
});
