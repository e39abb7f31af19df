/** A job's Python environment as the API takes it (the files' text) and shows it (domain/python-env.ts). */
import { Type } from '@sinclair/typebox';
import { MAX_PYTHON_ENV_BYTES } from '../../domain/python-env.ts';
import { SHA256_HEX } from '../../domain/code-snapshot.ts';

const fileText = (description: string) => Type.String({ minLength: 1, maxLength: MAX_PYTHON_ENV_BYTES, description });

/** What a submit, a retry or a fork gives: one requirements.txt, one pylock.toml, or a uv project's pyproject.toml and uv.lock. */
export const PythonEnvBodySchema = Type.Object(
  {
    requirements: Type.Optional(fileText("a requirements.txt's text: packages and versions, no options and no local paths (the node's package index is its agent's)")),
    pylock: Type.Optional(fileText("a pylock.toml's text (PEP 751): each package is installed at its locked version and hashes from the node's package index")),
    pyproject: Type.Optional(fileText("a uv project's pyproject.toml, with `uv_lock`: the node installs what `uv export --frozen` of the two names")),
    uv_lock: Type.Optional(fileText("the project's uv.lock, with `pyproject`")),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      "the Python environment the job runs in (`gpuctl submit --python-env FILE`): exactly one of `requirements`, `pylock`, or `pyproject` with `uv_lock`, at most 512 KiB together. Each node builds it with uv once per content, Python version and platform, into a cache shared read-only by the jobs that need it; the process gets its bin first on PATH and VIRTUAL_ENV. Inherited by its retries, forks and evaluations",
  },
);

export const PythonEnvSchema = Type.Object({
  kind: Type.Union([Type.Literal('requirements'), Type.Literal('pylock'), Type.Literal('uv-lock')], {
    description: 'requirements: a requirements.txt; pylock: a pylock.toml; uv-lock: a pyproject.toml with its uv.lock',
  }),
  sha256: Type.String({ pattern: SHA256_HEX, description: "sha256 of the file's text (UTF-8); of a uv project, of both files, each named with its length" }),
  bytes: Type.Integer({ minimum: 0, description: "the files' size together" }),
});
