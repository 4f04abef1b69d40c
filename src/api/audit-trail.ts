import type { FastifyInstance, FastifyRequest } from 'fastify';
import { shorten } from '../core/quote.js';
import type {
  AuditActorType,
  AuditEventInput,
  AuditEventRepository,
} from '../store/audit-events.js';

/** Methods that change something; reads are not audited. */
const CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Routes that take a POST but change nothing (a policy check as you type). */
const NOT_CHANGES = new Set(['/traffic_policy/validate']);

/** Path parameters whose values are secrets: recorded as `:name`, never as the value. */
const SECRET_PARAM = /token|secret|password|key$/i;

/** Longest path recorded; longer ones are cut, with '…' (paths are bounded by the router anyway). */
const MAX_PATH_CHARS = 512;

/**
 * The path as recorded: without the query string (it is not needed to say what changed, and
 * nothing in it belongs in a permanent record), with secret path parameters replaced by their
 * name, e.g. `/auth/setup/:token`.
 */
export function auditPath(request: FastifyRequest): string {
  let path = request.url.split('?')[0] ?? '';
  const params = (request.params ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(params)) {
    if (SECRET_PARAM.test(name) && typeof value === 'string' && value !== '') {
      path = path.split(encodeURIComponent(value)).join(`:${name}`).split(value).join(`:${name}`);
    }
  }
  return shorten(path, MAX_PATH_CHARS);
}

/** `id` (or `user.id`) of a JSON reply, read only to name what changed; nothing else is kept. */
function replyIds(payload: unknown): { id?: string; userId?: string } {
  if (typeof payload !== 'string' || !payload.startsWith('{')) return {};
  try {
    const body = JSON.parse(payload) as { id?: unknown; user?: { id?: unknown } };
    return {
      ...(typeof body.id === 'string' ? { id: body.id } : {}),
      ...(typeof body.user?.id === 'string' ? { userId: body.user.id } : {}),
    };
  } catch {
    return {};
  }
}

/** The audit record of a successful change, or undefined when the request is not one. */
export function auditEventOf(
  request: FastifyRequest,
  statusCode: number,
  payload: unknown,
): AuditEventInput | undefined {
  if (!CHANGING.has(request.method) || statusCode < 200 || statusCode >= 300) return undefined;
  if (NOT_CHANGES.has(request.routeOptions.url ?? '')) return undefined;
  const ids = replyIds(payload);
  let actorType: AuditActorType = 'none';
  let actorId: string | null = null;
  if (request.apiKeyId !== undefined) {
    actorType = 'api_key';
    actorId = request.apiKeyId;
  } else if (request.userId !== undefined) {
    actorType = 'user';
    actorId = request.userId;
  } else if (ids.userId !== undefined) {
    // Sign-in and first-user setup: the reply names the person who just signed in.
    actorType = 'user';
    actorId = ids.userId;
  }
  const pathId = (request.params as { id?: unknown } | undefined)?.id;
  return {
    operation_id: request.operationId || String(request.id),
    actor_type: actorType,
    actor_id: actorId,
    // Who used the key: its owner (a dashboard user, a bot user or the account's user).
    actor_owner_id: actorType === 'api_key' ? (request.access?.ownerId ?? null) : null,
    method: request.method,
    path: auditPath(request),
    status_code: statusCode,
    resource_id: ids.id ?? (typeof pathId === 'string' ? pathId : null),
    client_ip: request.ip,
  };
}

/**
 * Record every successful change (POST/PUT/PATCH/DELETE answered 2xx) made through the API or the
 * dashboard. Refusals are not recorded: they changed nothing, and authentication failures are
 * counted and logged by the auth hook already. The record is written before the reply is sent
 * (onSend), so a client that got its 2xx can list the event at once. A failure to write it does
 * not turn the reply into an error, since the change itself is done and a client told otherwise
 * would retry it; it is logged with every field instead.
 * @example installAuditTrail(app, repos.auditEvents);
 */
export function installAuditTrail(app: FastifyInstance, auditEvents: AuditEventRepository): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const event = auditEventOf(request, reply.statusCode, payload);
    if (event) {
      try {
        await auditEvents.record(event);
      } catch (err) {
        request.log.error({ err, audit_event: event }, 'audit event not recorded');
      }
    }
    return payload;
  });
}
