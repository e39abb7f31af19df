/**
 * A job's Python environment (issue 45, docs/environments.md): today a requirements.txt, kept
 * inline on the job (it is small), which every node that runs an attempt builds with uv into a
 * node-local cache shared read-only by every job with the same environment. The one source of the
 * limits and of the cache key that the CLI, the API and the agent must agree on.
 */

/** What a job (and each attempt's config) records of its Python environment. */
export interface PythonEnv {
  /** The only kind built today; pyproject.toml with uv.lock, and pylock.toml, come later. */
  kind: 'requirements';
  /** The file's text, as submitted. */
  text: string;
  /** sha256 of the text's UTF-8 bytes, hex. */
  sha256: string;
}

/** The largest requirements file a job may carry: 64 KiB (it travels in the job's row and its attempts' specs). */
export const MAX_REQUIREMENTS_BYTES = 64 * 1024;

/**
 * Why a requirements file may not be a job's, or null. Options (`--index-url`, `-r other.txt`,
 * `-e path`…) are refused: the node's package index is its agent's, never the job's, and the file
 * is the only one the node gets. A requirement's own `--hash=` options are kept.
 */
export function requirementsProblem(text: string): string | null {
  if (new TextEncoder().encode(text).length > MAX_REQUIREMENTS_BYTES) return `is larger than ${MAX_REQUIREMENTS_BYTES / 1024} KiB`;
  if (text.includes('\0')) return 'has a NUL byte (not a text file)';
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const option = raw
      .replace(/(^|\s)#.*$/, '')
      .trim()
      .split(/\s+/)
      .find((w) => w.startsWith('-') && !/^--hash(=|$)/.test(w));
    if (option) return `line ${i + 1}: options are not taken (${option.split('=')[0]}); the node's package index is its agent's`;
  }
  if (!lines.some((l) => l.replace(/(^|\s)#.*$/, '').trim() !== '')) return 'names no package';
  return null;
}

/**
 * The key of a built environment in a node's cache: the file's hash, the Python version and the
 * platform it is built for (uv's own version too, since a newer uv may resolve differently), as 64
 * hex digits. Two attempts with the same key share one build.
 */
export function pythonEnvKey(env: Pick<PythonEnv, 'kind' | 'sha256'>, target: { python: string; platform: string; uv: string }, hash: (s: string) => string): string {
  return hash(JSON.stringify(['gpuplane-python-env/1', env.kind, env.sha256, target.python, target.platform, target.uv]));
}
