/**
 * The device agent's tunnels as the API shows them, and their endpoints at the server: how a
 * tunnel is bound with the SDK, and what a refused or failed bind means for the API reply.
 */
import { RpcError } from '../protocol/index.js';
import {
  BurrowAgentError,
  CLI_HINTS,
  describeConnectError,
  type Endpoint,
  type Session,
} from '../sdk/index.js';
import { AgentApiError } from './errors.js';
import {
  defaultPolicyFor,
  policyJson,
  type DefaultPolicy,
  type PolicyValue,
  type TunnelProtocol,
} from './policy.js';
import type { StoredEndpointTunnel, StoredTunnel } from './state-file.js';
import type { TunnelRequest } from './tunnel-input.js';
import { labelsKey, tunnelKey } from './tunnel-keys.js';
import { redactOptions, tunnelTrafficPolicy, type TunnelOptions } from './tunnel-options.js';

/**
 * A tunnel in `GET /tunnels`: `policy` is the policy in force as JSON text, or null for none; the
 * endpoint options given at creation follow, without their secrets. A labeled tunnel has
 * `protocol` `labeled`, its `labels`, no `url` or `domain` (null), and its labels as `url_part`.
 */
export interface TunnelView extends TunnelOptions {
  url: string | null;
  url_part: string;
  protocol: TunnelProtocol | 'labeled';
  forwards_to: string;
  domain: string | null;
  labels?: Record<string, string>;
  policy: string | null;
}

/** The reply to `POST /tunnels`: `policy` is the request's policy, null when the default applied. */
export interface CreatedTunnel extends Omit<TunnelView, 'policy'> {
  policy: PolicyValue | null;
}

/** What the local API needs from the tunnels. */
export interface TunnelService {
  list(): TunnelView[];
  create(request: TunnelRequest): Promise<CreatedTunnel>;
  remove(urlPart: string): Promise<void>;
}

/** Codes of binds the token or the reservations do not permit: 403. */
export const NOT_PERMITTED = new Set([
  'ERR_NGROK_308',
  'ERR_NGROK_316',
  'ERR_NGROK_319',
  'ERR_NGROK_321',
  'ERR_NGROK_356',
  'ERR_NGROK_381',
  'ERR_NGROK_399',
  'ERR_NGROK_636',
]);
/** The name is online in another session, maybe our own previous process not yet noticed gone. */
export const ALREADY_ONLINE = 'ERR_NGROK_334';

/** True when the server answered with a refusal (as opposed to a network failure). */
export function isRefusal(err: unknown): err is BurrowAgentError {
  return err instanceof BurrowAgentError && err.cause instanceof RpcError;
}

/**
 * An error for logs and messages, with the server's code when it gave one. Connection failures
 * and authtoken refusals get a second line saying what to do, in the agent's flags.
 * @example describeError(err) // "The authtoken is malformed (ERR_NGROK_105)\nCreate an authtoken with …"
 */
export function describeError(err: unknown): string {
  return describeConnectError(err, CLI_HINTS);
}

/**
 * `record` as `GET /tunnels` shows it: the policy in force (the default one where the record has
 * none), options without secrets; a labeled tunnel with its labels and a null url and domain.
 * @example tunnelView(record, defaults) // { url: 'https://…', url_part: '…', policy: '{…}', … }
 */
export function tunnelView(record: StoredTunnel, defaults: DefaultPolicy | undefined): TunnelView {
  if (record.protocol === 'labeled') {
    const { protocol, forwards_to, labels } = record;
    const url_part = tunnelKey(record);
    return { url: null, url_part, protocol, forwards_to, domain: null, labels, policy: null };
  }
  return {
    url: record.url,
    url_part: record.url_part,
    protocol: record.protocol,
    forwards_to: record.forwards_to,
    domain: record.domain,
    policy:
      record.policy !== null
        ? policyJson(record.policy)
        : (defaultPolicyFor(defaults, record.protocol) ?? null),
    ...shownOptions(record),
  };
}

/**
 * `record` as `POST /tunnels` answers it: as the list shows it, with the request's own policy.
 * @example createdView(record) // { url: 'https://…', …, policy: null }
 */
export function createdView(record: StoredTunnel): CreatedTunnel {
  const view = tunnelView(record, undefined);
  return { ...view, policy: record.protocol === 'labeled' ? null : record.policy };
}

/**
 * The URL's part that names the tunnel: the hostname, or `host:port` for tcp (one host serves
 * many ports).
 * @example urlPart('https://device1.sitea.example.com:8443', 'http') // 'device1.sitea.example.com'
 */
export function urlPart(url: string, protocol: TunnelProtocol): string {
  const parsed = new URL(url);
  return protocol === 'tcp' ? parsed.host : parsed.hostname;
}

/** The option fields of `record` as replies show them: secrets redacted, none when none. */
export function shownOptions(record: StoredEndpointTunnel): TunnelOptions {
  return record.options ? redactOptions(record.options) : {};
}

/**
 * The traffic policy `record` is bound with: the rules of its endpoint options first, then its own
 * policy, else the default one where it can run. Throws a 400 AgentApiError when the engine
 * refuses the merge.
 * @example recordTrafficPolicy(record, defaults) // '{"on_http_request":[{"name":"basic_auth",…},…]}'
 */
export function recordTrafficPolicy(
  record: StoredEndpointTunnel,
  defaults: DefaultPolicy | undefined,
): string | undefined {
  if (record.policy !== null) {
    return tunnelTrafficPolicy(record.options, record.protocol, {
      field: 'policy',
      value: record.policy,
    });
  }
  const fallback = defaultPolicyFor(defaults, record.protocol);
  return tunnelTrafficPolicy(
    record.options,
    record.protocol,
    fallback === undefined ? undefined : { field: 'the default policy', value: fallback },
  );
}

/**
 * Bind `record` in `session`, forwarding to `target`, with {@link recordTrafficPolicy}; a labeled
 * record as a labeled tunnel (no policy of its own: the edge's applies).
 * @example const endpoint = await openTunnelEndpoint(session, record, 'localhost:8001', defaults);
 */
export async function openTunnelEndpoint(
  session: Session,
  record: StoredTunnel,
  target: string,
  defaults: DefaultPolicy | undefined,
): Promise<Endpoint> {
  const metadata = 'burrow agent';
  if (record.protocol === 'labeled') {
    const { labels } = record;
    return session.labeledTunnel({ labels, forward: target, forwardsTo: target, metadata });
  }
  const trafficPolicy = recordTrafficPolicy(record, defaults);
  const common = { forward: target, forwardsTo: target, trafficPolicy, metadata };
  switch (record.protocol) {
    case 'http':
      return session.httpEndpoint({ ...common, domain: record.domain });
    case 'tls':
      return session.tlsEndpoint({ ...common, domain: record.domain });
    case 'tcp':
      return session.tcpEndpoint({ ...common, addr: record.domain });
  }
}

/**
 * The API error for a bind that failed: the server's refusal with its code (403 for what the
 * token or the reservations do not permit, 409 for a name online elsewhere, else 400), or 503 when
 * the server did not answer.
 * @example throw bindFailure(err, request, '127.0.0.1:4443');
 */
export function bindFailure(
  err: unknown,
  request: TunnelRequest,
  serverAddr: string,
): AgentApiError {
  const labeled = request.protocol === 'labeled';
  const domain = labeled ? `labels ${labelsKey(request.labels)}` : request.domain;
  if (err instanceof AgentApiError) return err;
  if (isRefusal(err)) {
    const code = err.code;
    const status = code === ALREADY_ONLINE ? 409 : code && NOT_PERMITTED.has(code) ? 403 : 400;
    const aboutDomain =
      code === ALREADY_ONLINE || (NOT_PERMITTED.has(code ?? '') && code !== 'ERR_NGROK_636');
    return new AgentApiError(status, `the server refused the tunnel on ${domain}: ${err.message}`, {
      code,
      field: aboutDomain ? (labeled ? 'labels' : 'domain') : undefined,
    });
  }
  return new AgentApiError(
    503,
    `the tunnel on ${domain} could not be bound, the server at ${serverAddr} did not answer (${describeError(err)}); try again`,
  );
}
