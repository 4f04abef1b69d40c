import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../core/errors.js';
import type { AuditEvent } from '../store/audit-events.js';
import type { ApiContext } from './context.js';
import { listEnvelope, pageRequest } from './paging.js';
import { IdParams, ListOf, ListQuery, Nullable } from './schemas.js';

export const AuditEventSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  created_at: Type.String(),
  operation_id: Type.String(),
  actor: Type.Object({
    type: Type.Union([Type.Literal('api_key'), Type.Literal('user'), Type.Literal('none')]),
    id: Nullable(Type.String()),
    owner_id: Nullable(
      Type.String({
        description:
          'with an API key: who owns it (a dashboard user, bot user or the account user); else null',
      }),
    ),
  }),
  method: Type.String(),
  path: Type.String(),
  status_code: Type.Integer(),
  resource_id: Nullable(Type.String()),
  client_ip: Type.String(),
});

/**
 * `/audit_events`: the changes made through the API and dashboard, newest first (read-only).
 * @example await auditEventRoutes(app, ctx); // GET /audit_events?limit=20
 */
export async function auditEventRoutes(
  fastify: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const collectionUri = uris.collection('audit_events');
  const view = (e: AuditEvent) => ({
    id: e.id,
    uri: `${collectionUri}/${e.id}`,
    created_at: e.created_at,
    operation_id: e.operation_id,
    actor: { type: e.actor_type, id: e.actor_id, owner_id: e.actor_owner_id },
    method: e.method,
    path: e.path,
    status_code: e.status_code,
    resource_id: e.resource_id,
    client_ip: e.client_ip,
  });
  const tags = ['Audit events'];
  app.get(
    '/audit_events',
    {
      schema: {
        tags,
        summary: 'List audit events',
        querystring: ListQuery,
        response: { 200: ListOf('audit_events', AuditEventSchema) },
      },
    },
    async (request) => {
      const req = pageRequest(request.query);
      const page = await repos.auditEvents.list(req);
      return listEnvelope(
        'audit_events',
        { items: page.items.map(view), nextBeforeId: page.nextBeforeId },
        collectionUri,
        req,
      );
    },
  );
  app.get(
    '/audit_events/:id',
    {
      schema: {
        tags,
        summary: 'Get an audit event',
        params: IdParams,
        response: { 200: AuditEventSchema },
      },
    },
    async (request) => {
      const id = request.params.id;
      const event = await repos.auditEvents.get(id);
      if (!event) throw new NotFoundError(`The audit event ${id} was not found.`);
      return view(event);
    },
  );
}
