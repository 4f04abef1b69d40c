import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../core/errors.js';
import { EDGE_MODULES, type EdgeType, type ModuleName } from '../store/edges.js';
import type { ApiContext } from './context.js';
import { found, registerDelete } from './crud.js';
import { MODULE_SCHEMAS } from './edge-schemas.js';
import { moduleView } from './edge-views.js';
import { checkSavedPolicy } from './policy-validation.js';
import { IdParams } from './schemas.js';

const LABELS: Record<ModuleName, string> = {
  backend: 'backend',
  ip_restriction: 'IP restriction',
  mutual_tls: 'mutual TLS',
  tls_termination: 'TLS termination',
  traffic_policy: 'traffic policy',
};

/**
 * `PUT|GET|DELETE /edges/{tcp|tls}/{id}/{module}`. PUT replaces the module whole (200 with it);
 * GET of an unset module is 404; DELETE is 204 whether or not the module was set.
 * @example edgeModuleRoutes(app, ctx, 'tls', 'TLS edges')
 */
export function edgeModuleRoutes(
  fastify: FastifyInstance,
  { repos, uris }: ApiContext,
  type: EdgeType,
  tag: string,
): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const tags = [tag];
  for (const name of EDGE_MODULES[type]) {
    const path = `/edges/${type}/:id/${name}`;
    const label = LABELS[name];
    const schemas = MODULE_SCHEMAS[name];
    app.put(
      path,
      {
        schema: {
          tags,
          summary: `Replace the ${label} module of a ${type.toUpperCase()} edge`,
          params: IdParams,
          body: schemas.mutate,
          response: { 200: schemas.reply },
        },
      },
      async (request) => {
        const { id } = request.params;
        // The store compiles a policy; what it names must exist too, as at a bind.
        if (name === 'traffic_policy' && 'value' in request.body) {
          await checkSavedPolicy(repos, request.body.value, type, 'value');
        }
        const edge = found(await repos.edges.setModule(type, id, name, request.body));
        // Just set, so never null.
        return moduleView(uris, edge, name)!;
      },
    );
    app.get(
      path,
      {
        schema: {
          tags,
          summary: `Get the ${label} module of a ${type.toUpperCase()} edge`,
          params: IdParams,
          response: { 200: schemas.reply },
        },
      },
      async (request) => {
        const { id } = request.params;
        const edge = found(await repos.edges.get(id, type));
        const view = moduleView(uris, edge, name);
        if (view === null) {
          throw new NotFoundError(
            `The ${name} module is not set on edge ${id}. Set it with PUT /edges/${type}/${id}/${name}.`,
          );
        }
        return view;
      },
    );
    registerDelete(
      app,
      path,
      tags,
      `Remove the ${label} module of a ${type.toUpperCase()} edge`,
      (id) => repos.edges.deleteModule(type, id, name),
    );
  }
}
