import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every level: bodies that differ only in key order are one request. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** What an Idempotency-Key is bound to: the sha256 of the request body in canonical JSON. */
export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

/** The refusal of a malformed Idempotency-Key header (1-200 printable ASCII characters, as IdempotencyHeaders states). */
export const BAD_KEY = 'Idempotency-Key must be 1 to 200 printable ASCII characters';

/** Whether an Idempotency-Key header is well formed, for a route that validates its headers itself. */
export function isIdempotencyKey(key: unknown): key is string {
  return typeof key === 'string' && /^[\x20-\x7E]{1,200}$/.test(key);
}

/** Thrown inside a create's transaction to roll back what it made when a concurrent request with the same Idempotency-Key took the key. */
export class KeyTaken extends Error {}
