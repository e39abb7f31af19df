/**
 * Strings PostgreSQL cannot store, and JSON too deep to walk, are refused with 400 before any
 * handler or access check runs: a NUL character (text and jsonb refuse it), an unpaired UTF-16
 * surrogate (jsonb refuses it, text would silently turn it into U+FFFD), and JSON nested deeper
 * than MAX_DEPTH (serializers recurse). Binary bodies (log chunks) are bytes and not checked.
 */
import type { FastifyInstance } from 'fastify';
import { DomainError } from './errors.ts';

export const MAX_DEPTH = 64;
const BAD = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function badString(s: string): string | null {
  if (!BAD.test(s)) return null;
  return s.includes('\u0000') ? 'a NUL character' : 'an unpaired UTF-16 surrogate';
}

/** The first problem in a parsed value: where it is and what; iterative, so any depth is safe to walk. */
export function inputProblem(value: unknown, where: string): string | null {
  const stack: [unknown, string, number][] = [[value, where, 0]];
  while (stack.length > 0) {
    const [v, at, depth] = stack.pop()!;
    if (typeof v === 'string') {
      const bad = badString(v);
      if (bad) return `${at} holds ${bad}, which cannot be stored`;
    } else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      if (depth >= MAX_DEPTH) return `${at} is nested deeper than ${MAX_DEPTH} levels`;
      for (const [k, x] of Object.entries(v)) {
        const bad = badString(k);
        if (bad) return `a key in ${at} holds ${bad}, which cannot be stored`;
        stack.push([x, `${at}/${k.slice(0, 40)}`, depth + 1]);
      }
    }
  }
  return null;
}

export function installInputGuard(app: FastifyInstance): void {
  // Params and query before the access checks (they look ids up), the body once parsed.
  app.addHook('onRequest', async (req) => {
    const p = inputProblem(req.params, 'params') ?? inputProblem(req.query, 'query');
    if (p) throw new DomainError('invalid', p);
  });
  app.addHook('preValidation', async (req) => {
    const p = inputProblem(req.body, 'body');
    if (p) throw new DomainError('invalid', p);
  });
}
