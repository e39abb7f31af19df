/**
 * A job's container image (`gpuctl submit --image REF`, docs/environments.md): an OCI reference
 * its node's runtime runs the command in. A node that has a runtime says so with a label
 * (`runtime=podman`, set by its agent at start); a job with an image is placed only there.
 */

/** The label an agent sets where it found a container runtime, and the runtime it names. */
export const RUNTIME_LABEL = 'runtime';
export const PODMAN = 'podman';

/** The system tag of a run whose attempt ran in an image: the reference (the console's run page shows it). */
export const IMAGE_TAG = 'image';

/** The longest reference taken (a registry's name is at most 255 characters, a tag 128, a digest ~72). */
export const IMAGE_REF_MAX = 400;

// After distribution/reference's grammar: [domain[:port]/]path[:tag][@digest].
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const DOMAIN_PART = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
/** The whole grammar, as the API's document states it (its schema's pattern) and imageRefProblem checks it. */
export const IMAGE_REF_PATTERN = `^(?:(${DOMAIN})/)?(${COMPONENT}(?:/${COMPONENT})*)(?::(${TAG}))?(?:@(${DIGEST}))?$`;
const REFERENCE = new RegExp(IMAGE_REF_PATTERN);

/** Why `ref` is not an image reference a runtime would pull, in one line, or null. */
export function imageRefProblem(ref: string): string | null {
  const what = `image ${JSON.stringify(ref.length > 80 ? `${ref.slice(0, 80)}…` : ref)} is not an OCI image reference`;
  if (ref.length === 0) return 'image: give a reference (name[:tag][@digest], e.g. docker.io/library/python:3.12)';
  if (ref.length > IMAGE_REF_MAX) return `${what} (longer than ${IMAGE_REF_MAX} characters)`;
  const m = REFERENCE.exec(ref);
  if (!m) return `${what} (name[:tag][@digest]: lower-case name, e.g. docker.io/library/python:3.12)`;
  // A registry's own limits (a name of at most 255 characters, say) are the runtime's to say: its pull fails with its line.
  return null;
}

/** A job's selector as placement matches it: with an image, only nodes that have the runtime. */
export function placementSelector(selector: Record<string, string>, image: string | null | undefined): Record<string, string> {
  return image ? { ...selector, [RUNTIME_LABEL]: PODMAN } : selector;
}

/**
 * Why a job that asks for a container runtime (its image) waits, when nodes match the rest of its
 * selector but none of them has the runtime; null otherwise (no node matches the rest either: the
 * plain words say so).
 */
export function noRuntimeReason(selector: Record<string, string>, labels: readonly Record<string, string>[]): string | null {
  const wanted = selector[RUNTIME_LABEL];
  if (wanted === undefined) return null;
  const rest = Object.entries(selector).filter(([k]) => k !== RUNTIME_LABEL);
  const matching = labels.filter((l) => rest.every(([k, v]) => l[k] === v));
  if (matching.length === 0 || matching.some((l) => l[RUNTIME_LABEL] === wanted)) return null;
  const where = rest.length ? ` matching ${rest.map(([k, v]) => `${k}=${v}`).join(',')}` : '';
  return `no ONLINE node${where} has a container runtime (${RUNTIME_LABEL}=${wanted})`;
}
