import { Type, type TSchema } from '@sinclair/typebox';

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
export const StringMap = Type.Record(Type.String({ minLength: 1 }), Type.String());
export const ErrorBody = Type.Object({ error: Type.String(), message: Type.String() }, { $id: 'Error' });
export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
export const errorResponses = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 413: ErrorBody, 429: ErrorBody, 503: ErrorBody };
