/**
 * SQL's LIKE, for the MLflow searches that filter in code (experiments, logged models, the
 * registry, run statuses): `%` any run of characters (line breaks too), `_` any one character,
 * everything else itself.
 */

/** likeMatches says whether `s` matches the LIKE `pattern`; ILIKE when `caseInsensitive`. */
export function likeMatches(s: string, pattern: string, caseInsensitive: boolean): boolean {
  const re = pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/%/g, '.*').replace(/_/g, '.');
  return new RegExp(`^${re}$`, caseInsensitive ? 'is' : 's').test(s);
}
