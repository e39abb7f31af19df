import { randomBytes } from 'node:crypto';

/** Short, time-sortable ids: a prefix, milliseconds in base 36, and 6 random bytes. */
export function newId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
}
