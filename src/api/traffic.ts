import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { BurrowError, CODES } from '../core/errors.js';
import {
  headerPairs,
  responsePairs,
  type CapturedBody,
  type TrafficRecord,
} from '../edge/metrics/traffic-log.js';
import { replayRefusal, type ReplayResult } from '../edge/metrics/traffic-replay.js';
import {
  localTrafficView,
  summarize,
  type NodeMiss,
  type TrafficSummary,
  type TrafficView,
} from '../edge/metrics/traffic-view.js';
import { geoOf, lookupIpIntel } from '../policy/index.js';
import { parseClusterTrafficId } from '../edge/cluster/cluster-traffic.js';
import type { ApiContext } from './context.js';
import { found } from './crud.js';
import { holds } from './permissions.js';
import { Body, IdParams } from './schemas.js';

function bodyView(body: CapturedBody | undefined) {
  if (!body) return null;
  const text = body.bytes.toString('utf8');
  // Show text as text; anything that does not survive a UTF-8 round trip as base64.
  const isText = Buffer.from(text, 'utf8').equals(body.bytes);
  return {
    text: isText ? text : null,
    base64: isText ? null : body.bytes.toString('base64'),
    size: body.size,
    truncated: body.truncated,
  };
}

function summary(r: TrafficSummary) {
  return {
    id: r.id,
    node_id: r.node ?? null,
    host: r.host,
    tunnel_id: r.tunnelId,
    scheme: r.scheme,
    started_at: new Date(r.startedAt).toISOString(),
    method: r.method,
    path: r.path,
    status: r.status ?? null,
    duration_ms: r.durationMs === undefined ? null : Math.round(r.durationMs * 10) / 10,
    client_ip: r.clientIp,
    replay_of: r.replayOf ?? null,
    captured: r.captured,
    credentials_shown: r.credentialsShown,
  };
}

function detail(r: TrafficRecord, node: string | undefined) {
  // Looked up when a request is shown, not when it is recorded: few records are ever opened.
  const geo = geoOf(lookupIpIntel(r.clientIp));
  return {
    ...summary({ ...summarize(r, node), path: r.path }),
    ...(geo && { client_geo: geo }),
    request_headers: headerPairs(r.requestHeaders),
    response_headers: responsePairs(r.responseHeaders),
    request_body: bodyView(r.requestBody),
    response_body: bodyView(r.responseBody),
    replay_refusal: replayRefusal(r) ?? null,
  };
}

/** `tr_<n>`, or in a cluster `tr_<node>_<n>` (edge/cluster/cluster-traffic.ts). */
const AFTER = /^tr_(?:[A-Za-z0-9][A-Za-z0-9_-]{0,62}_)?\d{1,15}$/;

/** The node a cluster id names (`tr_<node>_<n>`); undefined for one process's `tr_<n>`. */
function nodeOf(id: string): string | undefined {
  return /^tr_\d+$/.test(id) ? undefined : parseClusterTrafficId(id, '')?.node;
}

/** Nodes that did not answer, as the API names them. */
function unansweredView(misses: readonly NodeMiss[]) {
  return misses.map((m) => ({ node_id: m.node, error: m.message }));
}

/** A host in a path: what `PUT /traffic/capture/:host` and `/traffic/credentials/:host` take. */
const HostParams = Type.Object({
  host: Type.String({ maxLength: 255, pattern: '^[A-Za-z0-9.*-]+$' }),
});

/**
 * `/traffic`: the traffic inspector (edge/metrics/traffic-view.ts): the last requests of each HTTP
 * endpoint this process's edge served, or in a cluster every edge node's (each kept in its node's
 * memory only), visitors' credentials redacted;
 * `PUT /traffic/capture/:host` switches body capture for one host,
 * `PUT /traffic/credentials/:host` whether its credentials are kept in clear, and
 * `POST /traffic/:id/replay` sends a request again. In a cluster every edge node is asked
 * (`unanswered_nodes` names those that did not answer in time); otherwise an API-only process has
 * no edge and lists nothing.
 * @example await trafficRoutes(app, ctx);
 */
export async function trafficRoutes(fastify: FastifyInstance, ctx: ApiContext): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Traffic inspector'];
  const view = (): TrafficView | undefined =>
    ctx.online.trafficView ?? (ctx.online.traffic && localTrafficView(ctx.online.traffic));
  const recordOr404 = async (id: string): Promise<TrafficRecord> => found(await view()?.get(id));
  const viewOr409 = (): TrafficView => {
    const v = view();
    if (!v)
      throw new BurrowError(undefined, 409, 'This process runs no edge, so it sees no traffic.');
    return v;
  };

  app.get(
    '/traffic',
    {
      schema: {
        tags,
        summary: 'List recent HTTP requests, newest first',
        querystring: Body({
          host: Type.Optional(Type.String({ maxLength: 255 })),
          after: Type.Optional(Type.String({ pattern: AFTER.source })),
          limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}$' })),
        }),
      },
    },
    async (request) => {
      const q = request.query;
      const listing = await view()?.list({
        host: q.host,
        after: q.after,
        limit: Math.min(Number(q.limit ?? 100), 100),
      });
      return {
        available: listing?.available ?? false,
        requests: (listing?.requests ?? []).map(summary),
        hosts: listing?.hosts ?? [],
        captured_hosts: listing?.capturedHosts ?? [],
        credentials_shown_hosts: listing?.credentialsShownHosts ?? [],
        redacted_headers: listing?.redactedHeaders ?? [],
        unanswered_nodes: unansweredView(listing?.unanswered ?? []),
      };
    },
  );

  app.get(
    '/traffic/:id',
    {
      schema: {
        tags,
        summary: 'Get one request with headers and captured bodies',
        params: IdParams,
      },
    },
    async (request) => {
      const record = await recordOr404(request.params.id);
      // Visitors' credentials shown on purpose (PUT /traffic/credentials/{host}) are for those who
      // may make that choice (traffic:write): not a viewer, nor a key scoped to reading traffic
      // (docs/security.md, Roles and scopes).
      const access = request.access;
      if (record.credentialsShown && access && !holds(access, 'traffic:write')) {
        throw new BurrowError(
          CODES.permissionDenied,
          403,
          `This request was recorded with its visitors' credentials shown (PUT /traffic/credentials/${record.host}), which only a role and key with traffic:write may see. Ask an operator or admin, or use a key with that scope.`,
          { required: 'traffic:write', role: access.role },
        );
      }
      return detail(record, nodeOf(record.id));
    },
  );

  app.post(
    '/traffic/:id/replay',
    {
      schema: {
        tags,
        summary: 'Send a recorded request again, through the ingress',
        params: IdParams,
        body: Body({}),
      },
    },
    async (request, reply) => {
      const record = await recordOr404(request.params.id);
      const refusal = replayRefusal(record);
      if (refusal) throw new BurrowError(CODES.invalidValue, 400, `Cannot replay: ${refusal}.`);
      let result: ReplayResult;
      try {
        result = await viewOr409().replay(record);
      } catch (err) {
        throw new BurrowError(undefined, 502, `The replay failed: ${(err as Error).message}`);
      }
      return reply.status(201).send({
        replay_of: record.id,
        status: result.status,
        omitted_headers: result.omittedHeaders,
      });
    },
  );

  app.put(
    '/traffic/capture/:host',
    {
      schema: {
        tags,
        summary: "Switch body capture for one endpoint's host",
        params: HostParams,
        body: Body({ enabled: Type.Boolean() }),
      },
    },
    async (request) => {
      const { host } = request.params;
      const { enabled } = request.body;
      const missed = await viewOr409().setCapture(host, enabled);
      return { host: host.toLowerCase(), enabled, unanswered_nodes: unansweredView(missed) };
    },
  );

  app.put(
    '/traffic/credentials/:host',
    {
      schema: {
        tags,
        summary: "Show (or redact again) visitors' credentials in one endpoint's requests",
        params: HostParams,
        body: Body({ shown: Type.Boolean() }),
      },
    },
    async (request) => {
      const { host } = request.params;
      const { shown } = request.body;
      const missed = await viewOr409().setCredentialsShown(host, shown);
      return { host: host.toLowerCase(), shown, unanswered_nodes: unansweredView(missed) };
    },
  );
}
