import { AjvCompiler } from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';

/*
 * Fastify compiles every route's request validator (Ajv) and response serializer
 * (fast-json-stringify) when the app gets ready: about 1.5 s of CPU for this API's few hundred
 * schemas, paid by every API start. These are Fastify's own compilers, the same options, each
 * route's compiled the first time it is used instead. A request is checked and a response written
 * exactly as before; only the moment of compiling moves.
 */

type Compiler = (route: { schema: unknown }) => (...args: never[]) => unknown;
type Builder = (...args: never[]) => Compiler;

/** A validator that compiles on its first call; Fastify reads `errors` and passes Ajv's context when `schemaEnv` is set, as for Ajv's own. */
function lazyValidator(compile: () => ((data: unknown, ctx?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown }) {
  let fn: ReturnType<typeof compile> | undefined;
  const validate = (data: unknown, ctx?: unknown): unknown => {
    fn ??= compile();
    const ok = fn.schemaEnv ? fn(data, ctx) : fn(data);
    validate.errors = fn.errors;
    return ok;
  };
  validate.errors = undefined as unknown;
  // Ajv's functions have it: Fastify then passes the instance path of the request part.
  validate.schemaEnv = true;
  return validate;
}

/** A serializer that compiles on its first call. */
function lazySerializer(compile: () => (data: unknown) => string) {
  let fn: ((data: unknown) => string) | undefined;
  return (data: unknown): string => (fn ??= compile())(data);
}

/** Fastify's `schemaController` option: its default compilers, each route's compiled on first use. */
export function lazyCompilers(): NonNullable<FastifyServerOptions['schemaController']> {
  const validators = AjvCompiler() as unknown as Builder;
  const serializers = SerializerSelector() as unknown as Builder;
  return {
    compilersFactory: {
      buildValidator: ((...args: never[]) => {
        const compiler = validators(...args);
        return (route: { schema: unknown }) => lazyValidator(() => compiler(route) as never);
      }) as never,
      buildSerializer: ((...args: never[]) => {
        const compiler = serializers(...args);
        return (route: { schema: unknown }) => lazySerializer(() => compiler(route) as never);
      }) as never,
    },
  };
}
