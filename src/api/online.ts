import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { DEFAULT_PORTS, parseHostPort } from '../core/host-port.js';
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { NotFoundError } from '../core/errors.js';
import {
  servedByAgent,
  type OnlineSession,
  type OnlineTunnel,
  type TunnelRegistry,
} from '../edge/registry/tunnel-registry.js';
import type { Page, PageRequest } from '../store/paging.js';
import type { CloudEndpoint } from '../store/index.js';
import type { TunnelGroupBackend } from '../store/backend-kinds.js';
import { cloudEndpointRoutes, cloudEndpointView } from './cloud-endpoints.js';
import type { ApiContext, OnlineState } from './context.js';
import { found } from './crud.js';
import { listEnvelope, newestPage, pageRequest } from './paging.js';
import { Body, IdParams, ListOf, ListQuery, Nullable, Ref } from './schemas.js';
import type { Uris } from './uris.js';

/**
 * The API's view of the edge's registry, for buildApi's `online` option: tunnel-group backends
 * list matching tunnels, and `/tunnel_sessions`, `/tunnels` and `/endpoints` list what is online.
 * @example buildApi({ repos, publicApiUrl, rateLimit, online: onlineStateOf(registry) })
 */
export function onlineStateOf(registry: TunnelRegistry): OnlineState {
  return {
    registry,
    tunnelsMatching: (labels) => registry.matchingLabels(labels).map((t) => t.id),
  };
}

const TunnelSessionSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  agent_version: Type.String(),
  credential: Ref,
  ip: Type.String(),
  metadata: Type.String(),
  os: Type.String(),
  region: Type.String(),
  started_at: Type.String(),
  transport: Type.String({
    description: '"ngrok/2" for ngrok SDKs, "burrow/1" for the Burrow SDK',
  }),
  node_id: Type.String({
    description: 'the Burrow node holding the session ("" on a single node without PostgreSQL)',
  }),
});

const TunnelSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  public_url: Type.Optional(Type.String({ description: 'absent on labeled tunnels' })),
  started_at: Type.String(),
  metadata: Type.String(),
  proto: Type.Optional(Type.String({ description: 'absent on labeled tunnels' })),
  region: Type.String(),
  tunnel_session: Ref,
  endpoint: Type.Optional(Nullable(Ref)),
  labels: Type.Optional(Type.Record(Type.String(), Type.String())),
  backends: Type.Optional(Type.Array(Ref)),
  forwards_to: Type.String(),
});

const EndpointSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  region: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
  public_url: Type.String(),
  url: Type.String(),
  proto: Type.String(),
  hostport: Type.String(),
  host: Type.String(),
  port: Type.Integer(),
  type: Type.String({
    description: '"ephemeral" (agent endpoints) or "cloud" (POST /endpoints, no agent)',
  }),
  metadata: Type.String(),
  description: Type.String(),
  domain: Nullable(Ref),
  tcp_addr: Nullable(Ref),
  tunnel: Nullable(Ref),
  edge: Type.Null(),
  tunnel_session: Nullable(Ref),
  upstream_url: Type.String(),
  traffic_policy: Type.String(),
  bindings: Type.Array(Type.String()),
  pooling_enabled: Type.Boolean(),
});

function sessionView(s: OnlineSession, uris: Uris, localNode: string) {
  return {
    id: s.id,
    uri: uris.of(s.id),
    agent_version: s.agentVersion,
    credential: uris.ref(s.credentialId),
    ip: s.ip,
    metadata: s.metadata,
    os: s.os,
    region: s.region ?? '',
    started_at: s.startedAt,
    transport: s.transport,
    node_id: s.node ?? localNode,
  };
}

/** `ep_` with the tunnel's 27 characters, as the API this follows pairs them. */
function endpointIdOf(tunnelId: string): string {
  return `ep_${tunnelId.slice(tunnelId.indexOf('_') + 1)}`;
}

function tunnelView(
  t: OnlineTunnel,
  registry: TunnelRegistry,
  uris: Uris,
  backends: TunnelGroupBackend[],
) {
  const common = {
    id: t.id,
    uri: uris.of(t.id),
    started_at: t.startedAt,
    metadata: t.metadata,
    region: registry.session(t.sessionId)?.region ?? '',
    tunnel_session: uris.ref(t.sessionId),
    forwards_to: t.forwardsTo,
  };
  if (t.labels) {
    const labels = t.labels;
    const serving = backends.filter((b) =>
      Object.entries(b.labels).every(([k, v]) => labels[k] === v),
    );
    return { ...common, labels, backends: serving.map((b) => uris.ref(b.id)) };
  }
  return {
    ...common,
    public_url: t.url ?? '',
    proto: t.proto ?? '',
    endpoint: uris.ref(endpointIdOf(t.id)),
  };
}

function endpointView(t: OnlineTunnel, registry: TunnelRegistry, uris: Uris) {
  const m = /^([a-z]+):\/\/([^/]+)$/.exec(t.url ?? '');
  const scheme = m?.[1] ?? t.proto ?? '';
  const authority = m?.[2] ?? '';
  const parsed = parseHostPort(authority, { port: 'optional', keepBrackets: true });
  const host = parsed?.host ?? authority;
  const port = parsed?.port ?? DEFAULT_PORTS[scheme] ?? 0;
  return {
    id: endpointIdOf(t.id),
    uri: uris.of(endpointIdOf(t.id)),
    region: registry.session(t.sessionId)?.region ?? '',
    created_at: t.startedAt,
    updated_at: t.startedAt,
    public_url: t.url ?? '',
    url: t.url ?? '',
    proto: t.proto ?? '',
    hostport: `${host}:${port}`,
    host,
    port,
    type: 'ephemeral',
    metadata: t.metadata,
    description: '',
    domain: t.domainId ? uris.ref(t.domainId) : null,
    tcp_addr: t.addrId ? uris.ref(t.addrId) : null,
    tunnel: uris.ref(t.id),
    edge: null,
    tunnel_session: uris.ref(t.sessionId),
    upstream_url: t.forwardsTo,
    traffic_policy: t.trafficPolicy ?? '',
    bindings: [t.internal !== undefined ? 'internal' : 'public'],
    pooling_enabled: t.pooling === true,
  };
}

/** Endpoints exist for addressed tunnels only; labeled tunnels are reached through edges. */
function isEndpointTunnel(t: OnlineTunnel): boolean {
  // Cloud endpoints are listed from the store, online or not (cloud-endpoints.ts).
  return !t.labels && servedByAgent(t);
}

/**
 * A page of endpoints, newest first: the newest agent endpoints online (their `ep_` id shares the
 * tunnel's `tn_` body, so tunnel ids order them) merged with one page of cloud endpoints read from
 * the store.
 */
async function endpointPage(
  registry: TunnelRegistry | undefined,
  ctx: ApiContext,
  req: PageRequest,
): Promise<Page<{ id: string; t?: OnlineTunnel; c?: CloudEndpoint }>> {
  const tunnelBefore = req.beforeId === undefined ? undefined : `tn_${req.beforeId.slice(3)}`;
  const agents = newestPage(
    registry?.listTunnels() ?? [],
    (t) => t.id,
    { beforeId: tunnelBefore, limit: req.limit },
    isEndpointTunnel,
  );
  const clouds = await ctx.repos.cloudEndpoints.list(req);
  const merged = [
    ...agents.items.map((t) => ({ id: endpointIdOf(t.id), t })),
    ...clouds.items.map((c) => ({ id: c.id, c })),
  ].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const more =
    merged.length > req.limit ||
    agents.nextBeforeId !== undefined ||
    clouds.nextBeforeId !== undefined;
  const items = merged.slice(0, req.limit);
  return { items, nextBeforeId: more ? items[items.length - 1]!.id : undefined };
}

async function allTunnelGroups(ctx: ApiContext): Promise<TunnelGroupBackend[]> {
  const out: TunnelGroupBackend[] = [];
  let beforeId: string | undefined;
  do {
    const page = await ctx.repos.backends.tunnelGroups.list({ beforeId, limit: 100 });
    out.push(...page.items);
    beforeId = page.nextBeforeId;
  } while (beforeId !== undefined);
  return out;
}

function listRoute(
  fastify: FastifyInstance,
  path: string,
  tag: string,
  item: TSchema,
  list: (req: PageRequest) => Promise<Page<unknown>>,
  collectionUri: string,
): void {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    `/${path}`,
    {
      schema: {
        tags: [tag],
        summary: `List online ${path.replace('_', ' ')}`,
        querystring: ListQuery,
        response: { 200: ListOf(path, item) },
      },
    },
    async (request) => {
      const req = pageRequest(request.query);
      return listEnvelope(path, await list(req), collectionUri, req);
    },
  );
}

/**
 * The online-only views (docs/api/tunnel-sessions.md, …): `/tunnel_sessions` with the Stop and
 * Restart commands, `/tunnels` and `/endpoints`. They list the edge's in-memory state; an
 * API-only process has none and lists nothing.
 */
export async function onlineRoutes(fastify: FastifyInstance, ctx: ApiContext): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { uris } = ctx;
  const registry = (): TunnelRegistry | undefined => ctx.online.registry;
  const sessionOr404 = (id: string): OnlineSession => {
    const s = registry()?.session(id);
    if (!s) throw new NotFoundError();
    return s;
  };

  listRoute(
    app,
    'tunnel_sessions',
    'Tunnel sessions',
    TunnelSessionSchema,
    async (req) => {
      const page = newestPage(registry()?.listSessions() ?? [], (s) => s.id, req);
      return {
        items: page.items.map((s) => sessionView(s, uris, ctx.online.nodeId ?? '')),
        nextBeforeId: page.nextBeforeId,
      };
    },
    uris.collection('tunnel_sessions'),
  );
  app.get(
    '/tunnel_sessions/:id',
    {
      schema: {
        tags: ['Tunnel sessions'],
        summary: 'Get an online tunnel session',
        params: IdParams,
        response: { 200: TunnelSessionSchema },
      },
    },
    async (request) => sessionView(sessionOr404(request.params.id), uris, ctx.online.nodeId ?? ''),
  );
  for (const command of ['stop', 'restart'] as const) {
    app.post(
      `/tunnel_sessions/:id/${command}`,
      {
        schema: {
          tags: ['Tunnel sessions'],
          summary: command === 'stop' ? 'Tell the agent to exit' : 'Tell the agent to restart',
          params: IdParams,
          body: Body({ id: Type.Optional(Type.String()) }),
          response: { 204: { type: 'null' } },
        },
      },
      async (request, reply) => {
        const session = sessionOr404(request.params.id);
        await (command === 'stop' ? session.stop() : session.restart());
        return reply.status(204).send();
      },
    );
  }

  listRoute(
    app,
    'tunnels',
    'Tunnels',
    TunnelSchema,
    async (req) => {
      const reg = registry();
      const page = newestPage(reg?.listTunnels() ?? [], (t) => t.id, req, servedByAgent);
      const backends = page.items.some((t) => t.labels) ? await allTunnelGroups(ctx) : [];
      return {
        items: page.items.map((t) => tunnelView(t, reg!, uris, backends)),
        nextBeforeId: page.nextBeforeId,
      };
    },
    uris.collection('tunnels'),
  );
  app.get(
    '/tunnels/:id',
    {
      schema: {
        tags: ['Tunnels'],
        summary: 'Get an online tunnel',
        params: IdParams,
        response: { 200: TunnelSchema },
      },
    },
    async (request) => {
      const reg = registry();
      const t = reg?.tunnel(request.params.id);
      if (!reg || !t) throw new NotFoundError();
      return tunnelView(t, reg, uris, t.labels ? await allTunnelGroups(ctx) : []);
    },
  );

  listRoute(
    app,
    'endpoints',
    'Endpoints',
    EndpointSchema,
    async (req) => {
      const reg = registry();
      const page = await endpointPage(reg, ctx, req);
      return {
        items: page.items.map(({ t, c }) =>
          c ? cloudEndpointView(c, uris) : endpointView(t!, reg!, uris),
        ),
        nextBeforeId: page.nextBeforeId,
      };
    },
    uris.collection('endpoints'),
  );
  app.get(
    '/endpoints/:id',
    {
      schema: {
        tags: ['Endpoints'],
        summary: 'Get an online endpoint',
        params: IdParams,
        response: { 200: EndpointSchema },
      },
    },
    async (request) => {
      const id = request.params.id;
      const reg = registry();
      const t = reg?.tunnel(`tn_${id.slice(id.indexOf('_') + 1)}`);
      if (reg && t && isEndpointTunnel(t)) return endpointView(t, reg, uris);
      return cloudEndpointView(found(await ctx.repos.cloudEndpoints.get(id)), uris);
    },
  );
  await cloudEndpointRoutes(app, ctx, EndpointSchema);
}
