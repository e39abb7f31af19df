/**
 * Reads a pass starts before it awaits them. Their outcomes are kept, so that a pass that ends first leaves no
 * rejection unhandled, and the pass awaits them all before it writes, or ends whatever happens: none runs on after it
 * (the pass cache is not read twice at once).
 */

/** A promise's outcome, kept. */
export type Settled<T> = Promise<{ ok: true; value: T } | { ok: false; err: unknown }>;

/** settle keeps `p`'s outcome instead of its rejection. */
export const settle = <T>(p: Promise<T>): Settled<T> =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );

/** outcome answers a kept outcome as the promise would have: its value, or its error thrown. */
export async function outcome<T>(s: Settled<T>): Promise<T> {
  const r = await s;
  if (r.ok) return r.value;
  throw r.err;
}

/** The reads one pass started: each begun through `begin`, all awaited by `settled`. */
export class Started {
  private readonly list: Settled<unknown>[] = [];

  begin<T>(p: Promise<T>): Settled<T> {
    const s = settle(p);
    this.list.push(s);
    return s;
  }

  async settled(): Promise<void> {
    await Promise.all(this.list);
  }
}
