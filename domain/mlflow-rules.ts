/**
 * MLflow's own rules for what its client sends, with its messages (mlflow/utils/validation.py and
 * the server's request checks), so a script that works against MLflow's server works against
 * GPUPlane's `/mlflow` and fails there with the same words. GPUPlane's own API keeps its stricter
 * rules (domain/metrics.ts): a metric MLflow takes, such as `-loss` at step -1, is stored as it is.
 */
import type { PointRules } from './metrics.ts';

export const MLFLOW_MAX_KEY = 250;

/** MLflow's words for a name with a character it refuses (POSIX: colons allowed). */
export const MLFLOW_BAD_CHARACTER = 'Names may only contain alphanumerics, underscores (_), dashes (-), periods (.), spaces ( ), colon(:) and slashes (/).';

/** Python's posixpath.normpath, which MLflow uses to refuse names that would resolve to another file name. */
export function posixNormpath(p: string): string {
  if (p === '') return '.';
  const initial = p.startsWith('/') ? (p.startsWith('//') && !p.startsWith('///') ? 2 : 1) : 0;
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg !== '..' || (initial === 0 && out.length === 0) || (out.length > 0 && out[out.length - 1] === '..')) out.push(seg);
    else if (out.length > 0) out.pop();
  }
  const joined = '/'.repeat(initial) + out.join('/');
  return joined === '' ? '.' : joined;
}

/** MLflow's path_not_unique: a name that is not its own normal path (`a//b`, `./a`, `/a`, `a/`, `..`). */
export function pathNotUnique(name: string): boolean {
  const norm = posixNormpath(name);
  return norm !== name || norm === '.' || norm.startsWith('..') || norm.startsWith('/');
}

const NAME_CHARS = /^[/\p{L}\p{N}_.\- :]*$/u;

/** What is wrong with a metric or param name by MLflow's rules, in its words; null when nothing is. */
export function mlflowNameProblem(name: string): string | null {
  if (!NAME_CHARS.test(name)) return MLFLOW_BAD_CHARACTER;
  if (pathNotUnique(name)) return `Names may be treated as files in certain cases, and must not resolve to other names when treated as such. This name would resolve to '${posixNormpath(name)}'`;
  if (name.length > MLFLOW_MAX_KEY) return `'${name.slice(0, 40)}…' exceeds the maximum length of ${MLFLOW_MAX_KEY} characters`;
  return null;
}

/** The points MLflow takes: its names, any integer step (negative ones too). */
export const MLFLOW_POINT_RULES: PointRules = { keyOk: (k) => mlflowNameProblem(k) === null, keyRule: MLFLOW_BAD_CHARACTER, minStep: Number.MIN_SAFE_INTEGER };

/** A value as Python's json.dumps(sort_keys=True, separators=(",", ":")) writes it, as MLflow's messages quote it. */
function pyJson(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return `[${v.map(pyJson).join(',')}]`;
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${pyJson(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** Python's name for a JSON value's type, as MLflow's hint says it. */
function pyType(v: unknown): string {
  if (v === null || v === undefined) return 'NoneType';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'string') return 'str';
  return 'dict';
}

/** MLflow's message for a field of the wrong type (the server's request check). */
export function wrongTypeMessage(param: string, value: unknown): string {
  return `Invalid value ${pyJson(value)} for parameter '${param}' supplied:  Hint: Value was of type '${pyType(value)}'. See the API docs for more information about request parameters.`;
}

/** MLflow's message for a missing required field (the server's request check). */
export const missingMessage = (param: string) => `Missing value for required parameter '${param}'. See the API docs for more information about request parameters.`;

/** Python's urllib.parse.unquote_plus: `+` is a space, `%XX` runs are UTF-8 bytes (bad ones U+FFFD), a stray `%` stays. */
function unquotePlus(s: string): string {
  return s.replace(/\+/g, ' ').replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
}

/** The path of a URI as Python's urllib.parse.urlparse reads it: after the scheme and `//netloc`, before `?`, `#` and a last segment's `;params`. */
function uriPath(uri: string): string {
  let rest = uri.replace(/[\t\r\n]/g, '');
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(rest);
  if (scheme) rest = rest.slice(scheme[0].length);
  if (rest.startsWith('//')) rest = rest.slice(2).replace(/^[^/?#]*/, '');
  rest = rest.replace(/[?#].*$/s, '');
  const usesParams = !scheme || ['ftp', 'hdl', 'prospero', 'http', 'imap', 'https', 'shttp', 'rtsp', 'rtspu', 'sip', 'sips', 'mms', 'sftp', 'tel'].includes(scheme[1].toLowerCase());
  if (usesParams) rest = rest.replace(/;[^/]*$/, '');
  return rest;
}

/**
 * MLflow's check of a model version source that is not a local path (its server's
 * _validate_non_local_source_contains_relative_paths): unquoted until it stops changing, the
 * source may have no `..` segment and no NUL, and its path, its slashes collapsed, must be an
 * absolute path that is already normal (no `.` segment). MLflow resolves it against the server's
 * disk; this is the same test without the disk (symbolic links aside). Null when the source passes.
 */
export function relativeSourceProblem(source: string): string | null {
  const message = `Invalid model version source: '${source}'. If supplying a source as an http, https, local file path, ftp, objectstore, or mlflow-artifacts uri, an absolute path must be provided without relative path references present. Please provide an absolute path.`;
  let s = source;
  for (let u = unquotePlus(s); u !== s; u = unquotePlus(s)) s = u;
  const path = uriPath(s).replace(/\/+$/, '').replace(/\/+/g, '/');
  if (path.includes('\0') || s.split('/').includes('..')) return message;
  // pathlib's resolve() of a relative path is under the server's working directory, never itself.
  if (!path.startsWith('/') || posixNormpath(path) !== path) return message;
  return null;
}
