import { parseAcl, type AclRule } from '../../core/acl.js';
import { shorten } from '../../core/quote.js';
import { tokenIdBody } from '../../core/tokens.js';
import type { Auth } from '../../protocol/index.js';
import type { Repositories } from '../../store/index.js';
import { AgentError, refusals } from '../binds/agent-errors.js';

/** What a successful Auth establishes about the session. */
export interface SessionAuth {
  credentialId: string;
  ownerId: string;
  acl: AclRule[];
  metadata: string;
  os: string;
  /** The SDK's version (Auth.Extra.Version). */
  agentVersion: string;
  clientType: string;
  /** The resumption cookie the agent presented, if any. */
  cookie: string | undefined;
  heartbeatIntervalMs: number;
  heartbeatToleranceMs: number;
  /** null: the agent is too old; "": supported; other text: why it is not supported. */
  stopUnsupported: string | null | undefined;
  restartUnsupported: string | null | undefined;
}

/** The SDKs' defaults (docs/protocol.md §4.2). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 10_000;
export const DEFAULT_HEARTBEAT_TOLERANCE_MS = 15_000;

const SUPPORTED_VERSIONS = ['3', '2'];

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function optionalText(value: unknown): string | null | undefined {
  return typeof value === 'string' || value === null ? value : undefined;
}

/** Milliseconds from a nanosecond duration; absent or 0 means the default. */
function heartbeatMs(
  which: 'interval' | 'tolerance',
  ns: unknown,
  fallbackMs: number,
  limits: { heartbeatMinMs: number; heartbeatMaxMs: number },
): number {
  if (ns === undefined || ns === null || ns === 0) return fallbackMs;
  const ms = typeof ns === 'number' && Number.isFinite(ns) ? ns / 1e6 : NaN;
  if (!(ms >= limits.heartbeatMinMs && ms <= limits.heartbeatMaxMs)) {
    throw refusals.badHeartbeat(which, ns, limits.heartbeatMinMs, limits.heartbeatMaxMs);
  }
  return ms;
}

/**
 * Check an Auth request: protocol version, authtoken (looked up by hash), an active owner, and
 * heartbeat settings. Throws the AgentError to send back.
 * @example const auth = await authenticateAgent(request, { repos, limits });
 */
export async function authenticateAgent(
  request: Auth,
  ctx: { repos: Repositories; limits: { heartbeatMinMs: number; heartbeatMaxMs: number } },
): Promise<SessionAuth> {
  const versions = Array.isArray(request.Version) ? request.Version : [];
  if (versions.length > 0 && !versions.some((v) => SUPPORTED_VERSIONS.includes(String(v)))) {
    throw refusals.badRequest(
      `none of the protocol versions ${shorten(JSON.stringify(versions))} is supported (supported: 3, 2)`,
    );
  }
  const extra = request.Extra ?? {};
  const token = text(extra.AuthToken).trim();
  if (token === '') throw refusals.noToken();
  if (!tokenIdBody(token)) throw refusals.malformedToken();
  const found = await ctx.repos.credentials.authenticate(token);
  if (!found) throw refusals.invalidToken();
  if (!found.ownerActive) throw refusals.ownerInactive(found.credential.owner_id);
  const acl = parseAcl(found.credential.acl);
  if ('error' in acl) {
    throw new AgentError(
      undefined,
      `The authtoken's ACL cannot be applied (${acl.error}); fix the credential's acl.`,
      'bad_acl',
    );
  }
  return {
    credentialId: found.credential.id,
    ownerId: found.credential.owner_id,
    acl: acl.rules,
    metadata: text(extra.Metadata),
    os: text(extra.OS),
    agentVersion: text(extra.Version),
    clientType: text(extra.ClientType),
    cookie: text(extra.Cookie) || undefined,
    heartbeatIntervalMs: heartbeatMs(
      'interval',
      extra.HeartbeatInterval,
      DEFAULT_HEARTBEAT_INTERVAL_MS,
      ctx.limits,
    ),
    heartbeatToleranceMs: heartbeatMs(
      'tolerance',
      extra.HeartbeatTolerance,
      DEFAULT_HEARTBEAT_TOLERANCE_MS,
      ctx.limits,
    ),
    stopUnsupported: optionalText(extra.StopUnsupportedError),
    restartUnsupported: optionalText(extra.RestartUnsupportedError),
  };
}
