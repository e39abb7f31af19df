import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { getNode, listNodesWithSlots } from '../../db/queries/nodes.ts';
import { notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { NodeSchema } from '../schemas/nodes.ts';
import { nodeJson } from '../serialize.ts';
import type { ApiDeps } from '../deps.ts';

export const nodeRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  app.get(
    '/nodes',
    { schema: { tags: ['nodes'], summary: 'Nodes with their cards and who owns each', response: { 200: Type.Object({ nodes: Type.Array(NodeSchema) }) } } },
    async () => ({ nodes: (await listNodesWithSlots(db)).map(nodeJson) }),
  );
  app.get(
    '/nodes/:id',
    { schema: { tags: ['nodes'], summary: 'One node', params: IdParams, response: { 200: NodeSchema, ...NotFound } } },
    async (req) => {
      if (!(await getNode(db, req.params.id))) throw notFound('node', req.params.id);
      const n = (await listNodesWithSlots(db)).find((x) => x.id === req.params.id);
      return nodeJson(n!);
    },
  );
};
