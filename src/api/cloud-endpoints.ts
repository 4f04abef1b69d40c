/**
 * Cloud endpoints (`type: "cloud"`): `POST`, `PATCH` and `DELETE /endpoints`, stored and served
 * by the edge with no agent online. `GET /endpoints` (online.ts) lists them beside the agents'
 * endpoints. A URL is checked like a bind's: a name must be reserved (or covered by a reserved
 * wildcard, or under the base domain), a TCP address reserved, an internal URL end in `.internal`.
 */
import { DEFAULT_PORTS, formatHostPort, parseHostPort } from '../core/host-port.js';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { CODES, ValidationError } from '../core/errors.js';
import { isAtOrUnder } from '../core/hostname.js';
import { quote } from '../core/quote.js';
import {
  parseCloudEndpointUrl,
  type CloudEndpointTarget,
} from '../edge/binds/cloud-endpoint-url.js';
import type { CloudEndpoint, Repositories } from '../store/index.js';
import type { ApiContext } from './context.js';
import { found, registerDelete } from './crud.js';
import { checkSavedPolicy } from './policy-validation.js';
import { Body, Description, IdParams, Metadata } from './schemas.js';
import type { Uris } from './uris.js';

/** What create and update both take; create adds `type` and requires `url`. */
const FIELDS = {
  traffic_policy: Type.Optional(Type.String()),
  bindings: Type.Optional(Type.Array(Type.String(), { maxItems: 1 })),
  pooling_enabled: Type.Optional(Type.Boolean()),
  description: Type.Optional(Description),
  metadata: Type.Optional(Metadata),
};

const CreateBody = Body({
  type: Type.Optional(Type.String({ description: '"cloud" (the only type that can be created)' })),
  url: Type.String(),
  ...FIELDS,
});

const UpdateBody = Body({ url: Type.Optional(Type.String()), ...FIELDS });

function invalid(field: string, message: string, code: string = CODES.invalidValue): never {
  throw new ValidationError(code, field, message);
}

/**
 * Check a cloud endpoint's URL, bindings and policy; returns the stored URL and bindings.
 * @example await checkCloudEndpoint(repos, 'https://app.example.com', undefined, '') // { url, bindings: ['public'] }
 */
async function checkCloudEndpoint(
  repos: Repositories,
  rawUrl: string,
  bindings: string[] | undefined,
  policy: string,
): Promise<{ target: CloudEndpointTarget; bindings: string[] }> {
  const target = parseCloudEndpointUrl(rawUrl);
  if (typeof target === 'string') invalid('url', target);
  const binding = (bindings?.[0] ?? (target.internal ? 'internal' : 'public')).toLowerCase();
  if (binding !== 'public' && binding !== 'internal') {
    invalid(
      'bindings',
      `must be ["public"] or ["internal"], not ${quote(JSON.stringify(bindings))}`,
    );
  }
  if (binding === 'internal' && !target.internal) {
    invalid(
      'url',
      `an internal endpoint's URL must end in '.internal' (e.g. https://api.internal), not ${quote(rawUrl)}`,
      CODES.internalName,
    );
  }
  if (binding === 'public' && target.internal) {
    invalid('bindings', `a URL ending in '.internal' is an internal endpoint: use ["internal"]`);
  }
  if (target.hostname) await checkName(repos, target.hostname);
  if (target.addr && !(await repos.reservedAddrs.findByAddr(target.addr))) {
    invalid(
      'url',
      `the TCP address ${quote(target.addr)} is not reserved: reserve one with POST /reserved_addrs and use its addr`,
      CODES.bindNotReserved,
    );
  }
  if (policy.trim() !== '') await checkSavedPolicy(repos, policy, target.proto, 'traffic_policy');
  return { target, bindings: [binding] };
}

async function checkName(repos: Repositories, name: string): Promise<void> {
  const domains = repos.reservedDomains;
  const base = domains.deps.settings.baseDomain.toLowerCase();
  const owned = name.startsWith('*.')
    ? await domains.findByDomain(name)
    : ((await domains.findCovering(name)) ??
      (name !== base && isAtOrUnder(name, base) ? true : undefined));
  if (!owned) {
    invalid(
      'url',
      `the domain ${quote(name)} is not reserved: reserve it (or a wildcard covering it) with POST /reserved_domains first, or use a name under ${base}`,
      CODES.bindNotReserved,
    );
  }
  const edge = await repos.edges.edgeForHostport([
    `${name}:${domains.deps.settings.httpsPort}`,
    `${name}:443`,
  ]);
  if (edge)
    invalid(
      'url',
      `${quote(name)} is a hostport of the edge ${edge.edge_id}: remove it from that edge's hostports, or use another name`,
      CODES.bindUsedByEdge,
    );
}

/**
 * The API shape of a cloud endpoint (the same fields as an agent endpoint's).
 * @example cloudEndpointView(ep, uris, 'https://app.example.com:8443')
 */
export function cloudEndpointView(ep: CloudEndpoint, uris: Uris) {
  const target = parseCloudEndpointUrl(ep.url);
  const t = typeof target === 'string' ? undefined : target;
  const scheme = t?.proto ?? '';
  const host = t?.addr
    ? (parseHostPort(t.addr, { keepBrackets: true })?.host ?? t.addr)
    : (t?.hostname ?? t?.internal ?? '');
  const port = t?.port ?? DEFAULT_PORTS[scheme] ?? 0;
  return {
    id: ep.id,
    uri: uris.of(ep.id),
    region: '',
    created_at: ep.created_at,
    updated_at: ep.updated_at,
    public_url: ep.url,
    url: ep.url,
    proto: scheme,
    hostport: formatHostPort(host, port),
    host,
    port,
    type: 'cloud',
    metadata: ep.metadata,
    description: ep.description,
    domain: null,
    tcp_addr: null,
    tunnel: null,
    edge: null,
    tunnel_session: null,
    upstream_url: '',
    traffic_policy: ep.traffic_policy,
    bindings: ep.bindings,
    pooling_enabled: ep.pooling_enabled,
  };
}

/**
 * Create, update and delete cloud endpoints (list and get are online.ts's, over both kinds).
 * @example await cloudEndpointRoutes(app, ctx, EndpointSchema);
 */
export async function cloudEndpointRoutes(
  fastify: FastifyInstance,
  ctx: ApiContext,
  item: ReturnType<typeof Type.Object>,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { repos, uris } = ctx;
  const tags = ['Endpoints'];
  app.post(
    '/endpoints',
    {
      schema: {
        tags,
        summary: 'Create a cloud endpoint',
        body: CreateBody,
        response: { 201: item },
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.type !== undefined && body.type !== 'cloud') {
        invalid(
          'type',
          `must be "cloud": agent endpoints are created by agents, not ${quote(body.type)}`,
        );
      }
      const policy = body.traffic_policy ?? '';
      const checked = await checkCloudEndpoint(repos, body.url, body.bindings, policy);
      const created = await repos.cloudEndpoints.create({
        url: checked.target.url,
        traffic_policy: policy,
        bindings: checked.bindings,
        pooling_enabled: body.pooling_enabled,
        description: body.description,
        metadata: body.metadata,
      });
      return reply.status(201).send(cloudEndpointView(created, uris));
    },
  );
  app.patch(
    '/endpoints/:id',
    {
      schema: {
        tags,
        summary: 'Update a cloud endpoint',
        params: IdParams,
        body: UpdateBody,
        response: { 200: item },
      },
    },
    async (request) => {
      const id = request.params.id;
      const current = found(await repos.cloudEndpoints.get(id));
      const patch = request.body;
      const url = patch.url ?? current.url;
      const policy = patch.traffic_policy ?? current.traffic_policy;
      const bindings = patch.bindings ?? (patch.url !== undefined ? undefined : current.bindings);
      const checked = await checkCloudEndpoint(repos, url, bindings, policy);
      const updated = await repos.cloudEndpoints.update(id, {
        ...patch,
        url: patch.url === undefined ? undefined : checked.target.url,
        bindings:
          patch.bindings === undefined && patch.url === undefined ? undefined : checked.bindings,
      });
      return cloudEndpointView(found(updated), uris);
    },
  );
  registerDelete(app, '/endpoints/:id', tags, 'Delete a cloud endpoint', (id) =>
    repos.cloudEndpoints.delete(id),
  );
}
