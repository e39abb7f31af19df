import { Type, type TSchema, type TString } from '@sinclair/typebox';
import { MAX_DEPTH } from '../input-guard.ts';

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
export const StringMap = Type.Record(Type.String({ minLength: 1 }), Type.String());
export const ErrorBody = Type.Object({ error: Type.String(), message: Type.String() }, { $id: 'Error' });
export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
/*
 * The error answers a handler gives itself, spread into a route's responses where it gives them.
 * Those of the machinery every route shares (400, 401, 403, 413-415, 429, 431, 500) are added to each
 * route by api/declared-responses.ts.
 */
/** A thing the request names does not exist. */
export const NotFound = { 404: ErrorBody };
/** The thing is in a state that refuses the request (already ended, a key used with another body). */
export const Conflict = { 409: ErrorBody };
/** Temporal did not answer in time; the request may be retried. */
export const Unavailable = { 503: ErrorBody };
export const HealthSchema = Type.Object({
  ok: Type.Boolean(),
  temporal_ui: Type.Union([Type.String(), Type.Null()], { description: 'base URL of the Temporal Web UI, when the plane runs one' }),
});
/** Query values arrive as strings (types are not coerced): an integer from 1 to 1000. */
export const LimitParam = (description = 'from 1 to 1000; default 100') => Type.String({ pattern: '^(?:[1-9][0-9]{0,2}|1000)$', description });

/**
 * How deep a top-level body field may nest objects and arrays: the input guard refuses a body
 * nested deeper than MAX_DEPTH levels, counted from the body (the body is 0, the field 1), so the
 * field's own values may hold MAX_DEPTH - 2 levels of objects or arrays below it.
 */
export const FIELD_DEPTH = MAX_DEPTH - 2;
/**
 * `params`: names to any JSON values. JSON Schema cannot bound nesting short of spelling every
 * level out, so the depth rule is in the description; no rule bounds how many there are.
 */
export const ParamsRecord = <K extends TString>(key: K, description?: string) =>
  Type.Record(key, Type.Unknown(), {
    description: `${description ? `${description}. ` : ''}Any JSON values, nested at most ${FIELD_DEPTH} levels of objects or arrays below params (the API refuses a body nested deeper than ${MAX_DEPTH} levels, with 400)`,
  });
