import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { BurrowError, CODES } from '../core/errors.js';
import {
  headerPairs,
  outgoingPairs,
  type CapturedBody,
  type TrafficRecord,
} from '../edge/metrics/traffic-log.js';
import {
  replayRefusal,
  type ReplayResult,
  type TrafficInspector,
} from '../edge/metrics/traffic-replay.js';
import { geoOf, lookupIpIntel } from '../policy/index.js';
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

function summary(r: TrafficRecord) {
  return {
    id: r.id,
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
    captured: r.requestBody !== undefined,
    credentials_shown: r.credentialsShown,
  };
}

function detail(r: TrafficRecord) {
  // Looked up when a request is shown, not when it is recorded: few records are ever opened.
  const geo = geoOf(lookupIpIntel(r.clientIp));
  return {
    ...summary(r),
    ...(geo && { client_geo: geo }),
    request_headers: headerPairs(r.requestHeaders),
    response_headers: outgoingPairs(r.responseHeaders),
    request_body: bodyView(r.requestBody),
    response_body: bodyView(r.responseBody),
    replay_refusal: replayRefusal(r) ?? null,
  };
}

const AFTER = /^tr_(\d+)$/;

/** A host in a path: what `PUT /traffic/capture/:host` and `/traffic/credentials/:host` take. */
const HostParams = Type.Object({
  host: Type.String({ maxLength: 255, pattern: '^[A-Za-z0-9.*-]+$' }),
});

/**
 * `/traffic`: the traffic inspector (edge/traffic-log.ts): the last requests of each HTTP endpoint
 * this process's edge served, kept in memory only, visitors' credentials redacted;
 * `PUT /traffic/capture/:host` switches body capture for one host,
 * `PUT /traffic/credentials/:host` whether its credentials are kept in clear, and
 * `POST /traffic/:id/replay` sends a request again. An API-only process has no edge and lists
 * nothing.
 * @example await trafficRoutes(app, ctx);
 */
export async function trafficRoutes(fastify: FastifyInstance, ctx: ApiContext): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Traffic inspector'];
  const recordOr404 = (id: string): TrafficRecord => found(ctx.online.traffic?.log.get(id));
  const inspectorOr409 = (): TrafficInspector => {
    if (!ctx.online.traffic)
      throw new BurrowError(undefined, 409, 'This process runs no edge, so it sees no traffic.');
    return ctx.online.traffic;
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
      const inspector = ctx.online.traffic;
      const afterSeq = q.after ? Number(AFTER.exec(q.after)![1]) : undefined;
      const records = inspector?.log.list({
        host: q.host,
        afterSeq,
        limit: Math.min(Number(q.limit ?? 100), 100),
      });
      return {
        available: inspector !== undefined,
        requests: (records ?? []).map(summary),
        hosts: inspector?.log.hosts() ?? [],
        captured_hosts: inspector?.log.capturedHosts() ?? [],
        credentials_shown_hosts: inspector?.log.credentialsShownHosts() ?? [],
        redacted_headers: inspector ? [...inspector.log.redactor.names].sort() : [],
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
      const record = recordOr404(request.params.id);
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
      return detail(record);
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
      const record = recordOr404(request.params.id);
      const refusal = replayRefusal(record);
      if (refusal) throw new BurrowError(CODES.invalidValue, 400, `Cannot replay: ${refusal}.`);
      let result: ReplayResult;
      try {
        result = await ctx.online.traffic!.replay(record);
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
      inspectorOr409().log.setCapture(host, enabled);
      return { host: host.toLowerCase(), enabled };
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
      inspectorOr409().log.setCredentialsShown(host, shown);
      return { host: host.toLowerCase(), shown };
    },
  );
}
