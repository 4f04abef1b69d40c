import swagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../core/logger.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { CODES, BurrowError, ValidationError } from '../core/errors.js';
import type { Repositories } from '../store/index.js';
import { apiKeyRoutes } from './api-keys.js';
import { installAuth, installRateLimit } from './auth.js';
import { installPermissions } from './permissions.js';
import { auditEventRoutes } from './audit-events.js';
import { installAuditTrail } from './audit-trail.js';
import { dashboardRoutes } from './dashboard-static.js';
import { policyValidationRoutes } from './policy-validation.js';
import { sessionAuth, sessionRoutes } from './sessions.js';
import { trafficRoutes } from './traffic.js';
import { metricsSeriesRoutes } from './metrics-series.js';
import { backendRoutes } from './backends.js';
import { botUserRoutes } from './bot-users.js';
import { userRoutes } from './users.js';
import { dashboardOidcRoutes, signInMethodsRoute } from './dashboard-oidc.js';
import type { DashboardOidcConfig } from '../core/dashboard-oidc-options.js';
import { certificateAuthorityRoutes } from './certificate-authorities.js';
import { tlsCertificateRoutes } from './tls-certificates.js';
import { acceptIdInUpdateBody } from './update-id.js';
import { credentialRoutes } from './credentials.js';
import { sshCredentialRoutes } from './ssh-credentials.js';
import { edgeRoutes } from './edges.js';
import { ipPolicyRoutes } from './ip-policies.js';
import { ipPolicyRuleRoutes } from './ip-policy-rules.js';
import { onlineRoutes } from './online.js';
import { policyEventRoutes } from './policy-events.js';
import { reservedAddrRoutes } from './reserved-addrs.js';
import { reservedDomainRoutes } from './reserved-domains.js';
import { vaultRoutes } from './vaults.js';
import { eventDestinationRoutes } from './event-destinations.js';
import { NOTHING_ONLINE, type ApiContext, type OnlineState } from './context.js';
import { fieldPath, installErrorHandlers } from './error-handler.js';
import { deeperThan } from './json-depth.js';
import { SCHEMA_KEYWORDS } from './schemas.js';
import { installChangeNotices } from './change-notices.js';
import { refuseUnstorableStrings } from './storable-input.js';
import { clientErrorHandler, frameworkErrors, installClosingGuard } from './transport-errors.js';
import { Uris } from './uris.js';

export interface ApiOptions {
  repos: Repositories;
  publicApiUrl: string;
  rateLimit: { max: number; windowSeconds: number };
  logger?: Logger | undefined;
  online?: OnlineState | undefined;
  /** Prometheus text for `GET /metrics` (served without key or version header); absent: no route. */
  metrics?: (() => string | Promise<string>) | undefined;
  /** Body size and JSON depth (`--api-max-body-bytes`, `--api-max-json-depth`); default 1 MiB / 64. */
  limits?: { maxBodyBytes: number; maxJsonDepth: number } | undefined;
  /** Told of each refusal for a limit (client IP, metric label): counted and logged once a minute. */
  refused?: ((ip: string, limit: string) => void) | undefined;
  /**
   * Connection timeouts (`--api-headers-timeout-ms`, `--api-idle-timeout-ms` between keep-alive
   * requests); default 10 s / 30 s. Short, so that connections that send nothing or trickle their
   * headers do not pile up.
   */
  timeouts?: { headersMs: number; idleMs: number } | undefined;
  /** Dashboard sign-in with OpenID Connect (`--dashboard-oidc-*`); absent: passwords only. */
  dashboardOidc?: DashboardOidcConfig | undefined;
}

/** Route plugins, one per resource, in the order they appear in the API description. */
const ROUTES: ReadonlyArray<(app: FastifyInstance, ctx: ApiContext) => Promise<void>> = [
  apiKeyRoutes,
  botUserRoutes,
  userRoutes,
  credentialRoutes,
  sshCredentialRoutes,
  reservedDomainRoutes,
  reservedAddrRoutes,
  ipPolicyRoutes,
  ipPolicyRuleRoutes,
  vaultRoutes,
  certificateAuthorityRoutes,
  tlsCertificateRoutes,
  backendRoutes,
  edgeRoutes,
  policyEventRoutes,
  eventDestinationRoutes,
  onlineRoutes,
  auditEventRoutes,
];

const DEFAULT_API_LIMITS = { maxBodyBytes: 1024 * 1024, maxJsonDepth: 64 };
const DEFAULT_API_TIMEOUTS = { headersMs: 10_000, idleMs: 30_000 };
/** A whole request (headers and body) must arrive within this, or the headers timeout if longer. */
const API_REQUEST_TIMEOUT_MS = 120_000;

/**
 * The management API as a Fastify app, not yet listening.
 * @example const app = await buildApi({ repos, publicApiUrl: 'http://127.0.0.1:4000', rateLimit: { max: 0, windowSeconds: 60 } });
 */
export async function buildApi(options: ApiOptions): Promise<FastifyInstance> {
  const { maxBodyBytes, maxJsonDepth } = options.limits ?? DEFAULT_API_LIMITS;
  const timeouts = options.timeouts ?? DEFAULT_API_TIMEOUTS;
  const app: FastifyInstance = Fastify({
    loggerInstance: options.logger as FastifyBaseLogger | undefined,
    bodyLimit: maxBodyBytes,
    // An idle keep-alive connection closes after idleMs; a new one must send its request line and
    // headers within headersMs (Node counts from the connection's start, checked every
    // connectionsCheckingInterval: 30 s unless set here). No socket-wide idle timeout: it would
    // cut a slow answer (a replay waiting on an agent) in the middle.
    keepAliveTimeout: timeouts.idleMs,
    requestTimeout: Math.max(API_REQUEST_TIMEOUT_MS, timeouts.headersMs),
    http: {
      headersTimeout: timeouts.headersMs,
      connectionsCheckingInterval: Math.min(1000, timeouts.headersMs),
    },
    genReqId: () => newId(ID_PREFIX.operation),
    // Errors of the router and of Node's HTTP parser, and requests that arrive while the server
    // closes, get the same body and Operation-Id header as every other error (transport-errors.ts).
    frameworkErrors,
    clientErrorHandler,
    return503OnClosing: false,
    ajv: {
      customOptions: {
        removeAdditional: false,
        coerceTypes: false,
        useDefaults: false,
        allErrors: false,
        verbose: true,
        keywords: [...SCHEMA_KEYWORDS],
      },
    },
  });
  const ctx: ApiContext = {
    repos: options.repos,
    uris: new Uris(options.publicApiUrl),
    online: options.online ?? NOTHING_ONLINE,
  };

  app.decorateRequest('operationId', '');
  app.addHook('onRequest', async (request, reply) => {
    request.operationId = String(request.id);
    void reply.header('Operation-Id', request.operationId);
    void reply.header('Ngrok-Operation-Id', request.operationId);
  });
  installErrorHandlers(app);
  app.addHook('onError', async (request, _reply, err) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') options.refused?.(request.ip, 'api_body_bytes');
  });
  installClosingGuard(app);
  installAuth(app, options.repos, sessionAuth(options.repos.users));
  await installRateLimit(app, options.rateLimit);
  // After the rate limit, so refused requests count too.
  installPermissions(app);
  refuseUnstorableStrings(app);
  installAuditTrail(app, options.repos.auditEvents);
  installChangeNotices(app, ctx.online);

  // An empty body counts as {} so that creates whose fields are all optional need none.
  // JSON only: any other body type (text/plain included) is refused with ERR_NGROK_216.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: maxBodyBytes },
    (req, body, done) => {
      const text = String(body);
      if (text.trim() === '') return done(null, {});
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        done(
          new BurrowError(
            CODES.malformedJson,
            400,
            `The request body is not valid JSON (${(err as Error).message}). Send a JSON object, or no body at all.`,
          ),
          undefined,
        );
        return;
      }
      // Before schema validation and every other walk of the body: a deep body costs them all.
      const deep = deeperThan(parsed, maxJsonDepth);
      if (deep) {
        options.refused?.(req.ip, 'api_json_depth');
        const field = fieldPath(deep);
        return done(
          new ValidationError(
            CODES.invalidValue,
            field,
            `nested deeper than ${maxJsonDepth} levels of objects and arrays (the server's --api-max-json-depth): send a flatter body`,
          ),
          undefined,
        );
      }
      done(null, parsed);
    },
  );
  app.addHook('preValidation', async (request) => {
    if (
      request.body === undefined &&
      (request.method === 'POST' || request.method === 'PATCH' || request.method === 'PUT')
    ) {
      request.body = {};
    }
    acceptIdInUpdateBody(request);
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Burrow management API',
        version: '2',
        description:
          'Manage edges, their modules, reserved domains and addresses, IP policies, backends, bot users, authtokens and API keys. Every request carries `Authorization: Bearer <API key>` and `Service-Version: 2`.',
      },
      servers: [{ url: options.publicApiUrl }],
      components: {
        securitySchemes: { apiKey: { type: 'http', scheme: 'bearer' } },
      },
      security: [{ apiKey: [] }],
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  const metrics = options.metrics;
  if (metrics) {
    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) =>
      reply.type('text/plain; version=0.0.4').send(await metrics()),
    );
  }

  // The dashboard: sign-in (first: its hook gives keys made there an owner), its page and files,
  // and what only it needs (policy checks as you type, traffic).
  await sessionRoutes(app, options.repos.users, {
    secureCookies: options.publicApiUrl.startsWith('https:'),
  });
  await signInMethodsRoute(app, options.dashboardOidc !== undefined);
  if (options.dashboardOidc) {
    await dashboardOidcRoutes(app, options.repos.users, options.dashboardOidc, {
      publicApiUrl: options.publicApiUrl,
      secureCookies: options.publicApiUrl.startsWith('https:'),
    });
  }
  for (const routes of ROUTES) await routes(app, ctx);
  await dashboardRoutes(app);
  await policyValidationRoutes(app, ctx);
  await trafficRoutes(app, ctx);
  await metricsSeriesRoutes(app, ctx);
  await app.ready();
  return app;
}
