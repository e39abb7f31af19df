/**
 * The one reading of an id list in a query (`GET /metrics/compare?runs=a,b`). The access rule
 * (api/auth/access-rules.ts), which runs before validation, and the handler both read the list
 * through compareRunIds, so the ids whose projects are checked are exactly the ids whose data
 * is served: padding, repeats and blanks cannot make them differ.
 */
import { DomainError } from './errors.ts';

/** How many distinct runs one compare call may name. */
export const MAX_COMPARE_RUNS = 50;

/** A comma-separated list: each entry trimmed, blanks dropped, each id once, in first-seen order. */
export function idList(raw: string): string[] {
  return [...new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))];
}

/**
 * compareRunIds reads `runs` as both the access rule and the handler see it: a value given more
 * than once (an array before validation), none, or more than MAX_COMPARE_RUNS distinct ids is 400.
 */
export function compareRunIds(raw: string | string[] | undefined): string[] {
  if (Array.isArray(raw)) throw new DomainError('invalid', 'runs must be given once, as a comma-separated list');
  const ids = idList(raw ?? '');
  if (ids.length === 0 || ids.length > MAX_COMPARE_RUNS) throw new DomainError('invalid', `runs must name 1 to ${MAX_COMPARE_RUNS} run ids`);
  return ids;
}
