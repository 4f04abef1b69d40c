import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../core/errors.js';
import type { OnlineTunnel } from '../edge/registry/tunnel-registry.js';
import type { ApiContext } from './context.js';
import { found } from './crud.js';
import { IdParams, Nullable } from './schemas.js';

const PolicyEventSchema = Type.Object({
  timestamp: Type.String({ description: 'RFC 3339, milliseconds' }),
  owner_id: Type.String({
    description:
      'the edge whose policy produced the event; for endpoints, the first tunnel of the bind',
  }),
  phase: Type.String({ description: 'on_tcp_connect, on_http_request or on_http_response' }),
  rule: Type.Object({ index: Type.Integer(), name: Nullable(Type.String()) }),
  action: Nullable(Type.Object({ index: Type.Integer(), type: Type.String() })),
  outcome: Type.String({
    description:
      'log, denied, closed, responded, redirected, rate-limited, would-rate-limit, restricted, would-restrict, unauthorized or error',
  }),
  message: Type.String(),
  client_ip: Type.String(),
  client_geo: Type.Optional(
    Type.Object(
      {
        country_code: Type.String(),
        subdivision: Type.String(),
        city: Type.String(),
        as_number: Type.Integer(),
        as_organization: Type.String(),
      },
      {
        description: "what the server's --geoip-* databases say of client_ip; absent when nothing",
      },
    ),
  ),
  metadata: Nullable(Type.Record(Type.String(), Type.Unknown())),
});

const EventList = Type.Object({
  events: Type.Array(PolicyEventSchema),
  uri: Type.String(),
});

/**
 * `GET /edges/{tcp|tls}/{id}/traffic_policy/events`: the latest events (up to 1000, newest
 * first) of the edge's traffic policy: what `log` actions recorded and what the policy decided.
 * They live in the memory of the process that runs the edge; an API-only process has none.
 * Endpoints of agent binds have the same at `GET /tunnels/{id}/traffic_policy/events` and
 * `GET /endpoints/{id}/traffic_policy/events` while they are online.
 * @example GET /edges/tls/edgtls_…/traffic_policy/events → { events: [...], uri }
 */
export async function policyEventRoutes(fastify: FastifyInstance, ctx: ApiContext): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  for (const type of ['tcp', 'tls'] as const) {
    app.get(
      `/edges/${type}/:id/traffic_policy/events`,
      {
        schema: {
          tags: [`${type.toUpperCase()} edges`],
          summary: `List the traffic policy events of a ${type.toUpperCase()} edge`,
          params: IdParams,
          response: { 200: EventList },
        },
      },
      async (request) => {
        const { id } = request.params;
        found(await ctx.repos.edges.get(id, type));
        return {
          events: [...(ctx.online.policyEvents?.eventsFor(id) ?? [])],
          uri: ctx.uris.collection(`edges/${type}/${id}/traffic_policy/events`),
        };
      },
    );
  }

  // Endpoints of agent binds: online tunnels only, by tunnel id or endpoint id (`ep_` + the
  // tunnel id's characters). A bind's tunnels share one event owner (see endpoint-policy.ts),
  // so the events survive the agent reconnecting.
  const tunnelById = (id: string): OnlineTunnel | undefined => ctx.online.registry?.tunnel(id);
  const tunnelOfEndpoint = (id: string): OnlineTunnel | undefined => {
    if (!id.startsWith('ep_')) return undefined;
    const tunnel = tunnelById(`tn_${id.slice(3)}`);
    return tunnel && !tunnel.labels ? tunnel : undefined;
  };
  const routes = [
    { path: 'tunnels', tag: 'Tunnels', what: 'an online tunnel', find: tunnelById },
    { path: 'endpoints', tag: 'Endpoints', what: 'an online endpoint', find: tunnelOfEndpoint },
  ];
  for (const { path, tag, what, find } of routes) {
    app.get(
      `/${path}/:id/traffic_policy/events`,
      {
        schema: {
          tags: [tag],
          summary: `List the traffic policy events of ${what} (its bind's TrafficPolicy)`,
          params: IdParams,
          response: { 200: EventList },
        },
      },
      async (request) => {
        const { id } = request.params;
        const tunnel = find(id);
        if (!tunnel) throw new NotFoundError();
        const owner = tunnel.policy?.ownerId;
        return {
          events: owner === undefined ? [] : [...(ctx.online.policyEvents?.eventsFor(owner) ?? [])],
          uri: ctx.uris.collection(`${path}/${id}/traffic_policy/events`),
        };
      },
    );
  }
}
