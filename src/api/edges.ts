import type { FastifyInstance } from 'fastify';
import type { EdgeType } from '../store/edges.js';
import type { ApiContext } from './context.js';
import { registerCrud } from './crud.js';
import { edgeModuleRoutes } from './edge-modules.js';
import { edgeBody, edgeSchema } from './edge-schemas.js';
import { edgeView } from './edge-views.js';
import { checkSavedPolicy } from './policy-validation.js';

const NAMES: Record<EdgeType, { name: string; tag: string; listKey: string }> = {
  tcp: { name: 'TCP edge', tag: 'TCP edges', listKey: 'tcp_edges' },
  tls: { name: 'TLS edge', tag: 'TLS edges', listKey: 'tls_edges' },
};

/** `/edges/tcp` and `/edges/tls`: CRUD, plus a PUT/GET/DELETE path per module. */
export async function edgeRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  const { repos, uris } = ctx;
  const edges = repos.edges;
  for (const type of ['tcp', 'tls'] as const) {
    // The store compiles the module's policy; what it names must exist too, as at a bind.
    const checkEdgePolicy = async (module: { value: string } | null | undefined) => {
      if (module) await checkSavedPolicy(repos, module.value, type, 'traffic_policy.value');
    };
    const body = edgeBody(type);
    registerCrud(
      app,
      {
        path: `edges/${type}`,
        ...NAMES[type],
        item: edgeSchema(type),
        createBody: body,
        updateBody: body,
        createBodyOptional: true,
        repo: {
          create: async (input) => {
            await checkEdgePolicy(input.traffic_policy);
            return edges.create(type, input);
          },
          get: (id) => edges.get(id, type),
          list: (page) => edges.list(type, page),
          update: async (id, patch) => {
            await checkEdgePolicy(patch.traffic_policy);
            return edges.update(type, id, patch);
          },
          delete: (id) => edges.delete(type, id),
        },
        view: (edge) => edgeView(uris, edge),
      },
      uris.collection(`edges/${type}`),
    );
    edgeModuleRoutes(app, ctx, type, NAMES[type].tag);
  }
}
