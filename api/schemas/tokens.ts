import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';

const ProjectName = Type.String({ minLength: 1, maxLength: 200, pattern: '^[^\\u0000-\\u001f]+$' });

export const CreateTokenBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200, pattern: '^[^\\u0000-\\u001f]+$' }),
    role: Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer'), Type.Literal('node'), Type.Literal('metrics')]),
    projects: Type.Optional(Type.Array(ProjectName, { maxItems: 1000, description: 'member and viewer: the projects it may touch; ["*"] for all' })),
    node_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$', description: 'node: the node it speaks for' })),
  },
  {
    additionalProperties: false,
    description: 'a node token needs node_id, and only it takes one; a member or viewer token needs projects, an admin, node or metrics token takes none',
    allOf: [
      { if: { properties: { role: { const: 'node' } } }, then: { required: ['node_id'] }, else: { not: { required: ['node_id'] } } },
      { if: { properties: { role: { enum: ['member', 'viewer'] } } }, then: { required: ['projects'], properties: { projects: { type: 'array', minItems: 1 } } }, else: { properties: { projects: { type: 'array', maxItems: 0 } } } },
    ],
  },
);
export type CreateTokenBody = Static<typeof CreateTokenBody>;

export const TokenSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: Type.String(),
  projects: Type.Array(Type.String()),
  node_id: Nullable(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  revoked_at: Nullable(Type.String({ format: 'date-time' })),
});
export const CreatedTokenSchema = Type.Intersect([TokenSchema, Type.Object({ token: Type.String({ description: 'shown once; only its hash is kept' }) })]);

export const WhoAmISchema = Type.Object({
  kind: Type.String(),
  name: Type.String(),
  role: Type.String(),
  projects: Type.Array(Type.String()),
  node_id: Nullable(Type.String()),
});
