/**
 * The limits of every listener, each a server option with a safe default. They live here, apart
 * from server-options.ts, so the whole set is one block there, and one table in docs/security.md
 * (what each protects) and one in docs/configuration.md (flag, variable, default).
 */

import { quote } from './quote.js';

/** Limits as the server uses them (milliseconds, bytes, counts). */
export interface ServerLimits {
  /** Public ingress (HTTP, HTTPS and TCP ports together): open connections in all and per client IP. */
  ingressMaxConnections: number;
  ingressMaxConnectionsPerIp: number;
  /** Agent listener: open connections in all and per client IP. */
  agentMaxConnections: number;
  agentMaxConnectionsPerIp: number;
  /** Every TLS listener: the handshake must finish this soon. */
  tlsHandshakeTimeoutMs: number;
  /** HTTP ingress: the request line and headers must arrive this soon (slowloris). */
  headersTimeoutMs: number;
  /** HTTP ingress: an idle keep-alive connection is closed after this long. */
  keepAliveTimeoutMs: number;
  /** HTTP ingress: bytes of request line plus headers (431 beyond). */
  maxHeaderBytes: number;
  /** HTTP ingress: header fields per request (431 beyond). */
  maxHeaderCount: number;
  /** HTTP/2 clients: streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  http2MaxConcurrentStreams: number;
  /** Agents: Auth must arrive this soon after the TLS handshake. */
  agentAuthTimeoutMs: number;
  /** Agents: sessions one credential may hold at once. */
  agentMaxSessionsPerCredential: number;
  /** Public ingress (HTTP, HTTPS, TCP ports): 1 = a PROXY v1/v2 header first (opt-in). */
  ingressProxyProtocol: number;
  /** Agent listener: 1 = every connection starts with a PROXY v1/v2 header (opt-in). */
  agentProxyProtocol: number;
  /** Agents: streams the agent may hold open at once in one session (RST beyond). */
  agentMaxStreamsPerSession: number;
  /** Agents: tunnels (binds) online at once in one session (ERR_NGROK_324 beyond). */
  agentMaxTunnelsPerSession: number;
  /** Agents: bytes of the largest muxado DATA frame accepted (GOAWAY FrameSize beyond). */
  agentMaxFrameBytes: number;
  /** Agents: bytes of one RPC request (Bind, Unbind, …) accepted. */
  agentMaxRpcBytes: number;
  /** API: bytes of a request body (413 beyond). */
  apiMaxBodyBytes: number;
  /** API: nesting depth of a JSON body (400 beyond). */
  apiMaxJsonDepth: number;
  /** API and dashboard listener: open connections in all and per client IP. */
  apiMaxConnections: number;
  apiMaxConnectionsPerIp: number;
  /** API: the request line and headers must arrive this soon (408). */
  apiHeadersTimeoutMs: number;
  /** API: a keep-alive connection with no new request for this long is closed. */
  apiIdleTimeoutMs: number;
  /** Raw relays (TCP, TLS, upgrades): closed after this long with no byte either way. */
  relayIdleTimeoutMs: number;
  /** Raw relays: once one side has sent its FIN, closed after this long with no byte. */
  relayHalfClosedTimeoutMs: number;
}

/** One limit option: flag/config name, the field it sets, its default, and its bounds. */
export interface LimitSpec {
  name: string;
  field: keyof ServerLimits;
  description: string;
  default: string;
  min: number;
  max: number;
}

/**
 * Every limit option. Appended to SERVER_OPTIONS (flags, BURROW_* variables, config keys).
 * @example LIMIT_OPTIONS.find((o) => o.name === 'agent-auth-timeout-ms')?.default // '10000'
 */
export const LIMIT_OPTIONS: readonly LimitSpec[] = [
  {
    name: 'ingress-max-connections',
    field: 'ingressMaxConnections',
    description:
      'open public connections in all, over the HTTP, HTTPS and every TCP endpoint port; more are closed at once',
    default: '10000',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'ingress-max-connections-per-ip',
    field: 'ingressMaxConnectionsPerIp',
    description: 'open public connections per client IP, over all public ports together',
    default: '256',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'agent-max-connections',
    field: 'agentMaxConnections',
    description: 'open agent connections in all',
    default: '5000',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'agent-max-connections-per-ip',
    field: 'agentMaxConnectionsPerIp',
    description: 'open agent connections per client IP',
    default: '64',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'tls-handshake-timeout-ms',
    field: 'tlsHandshakeTimeoutMs',
    description: 'a TLS handshake (ingress and agent listener) must finish within this many ms',
    default: '10000',
    min: 100,
    max: 600_000,
  },
  {
    name: 'headers-timeout-ms',
    field: 'headersTimeoutMs',
    description: 'HTTP ingress: the request line and headers must arrive within this many ms (408)',
    default: '30000',
    min: 100,
    max: 600_000,
  },
  {
    name: 'keep-alive-timeout-ms',
    field: 'keepAliveTimeoutMs',
    description: 'HTTP ingress: idle keep-alive connections close after this many ms',
    default: '60000',
    min: 100,
    max: 3_600_000,
  },
  {
    name: 'max-header-bytes',
    field: 'maxHeaderBytes',
    description: 'HTTP ingress: bytes of request line plus headers (431 beyond)',
    default: '16384',
    min: 1024,
    max: 1_048_576,
  },
  {
    name: 'max-header-count',
    field: 'maxHeaderCount',
    description: 'HTTP ingress: header fields per request (431 beyond)',
    default: '100',
    min: 8,
    max: 10_000,
  },
  {
    name: 'http2-max-concurrent-streams',
    field: 'http2MaxConcurrentStreams',
    description:
      'HTTP/2 clients: streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS; a stream beyond is refused)',
    default: '100',
    min: 1,
    max: 10_000,
  },
  {
    name: 'agent-auth-timeout-ms',
    field: 'agentAuthTimeoutMs',
    description: 'agents must authenticate within this many ms of the TLS handshake',
    default: '10000',
    min: 100,
    max: 600_000,
  },
  {
    name: 'agent-max-sessions-per-credential',
    field: 'agentMaxSessionsPerCredential',
    description: 'agent sessions one authtoken may hold at once (ERR_NGROK_108 beyond)',
    default: '100',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'ingress-proxy-protocol',
    field: 'ingressProxyProtocol',
    description:
      '1: HTTP, HTTPS and TCP endpoint connections must start with a PROXY protocol v1/v2 header (behind a load balancer), others are closed; 0: off',
    default: '0',
    min: 0,
    max: 1,
  },
  {
    name: 'agent-proxy-protocol',
    field: 'agentProxyProtocol',
    description:
      '1: agent connections must start with a PROXY protocol v1/v2 header (behind a load balancer), others are closed; 0: off',
    default: '0',
    min: 0,
    max: 1,
  },
  {
    name: 'agent-max-streams-per-session',
    field: 'agentMaxStreamsPerSession',
    description: 'streams an agent may hold open at once in one session (RST StreamRefused beyond)',
    default: '1024',
    min: 8,
    max: 1_000_000,
  },
  {
    name: 'agent-max-tunnels-per-session',
    field: 'agentMaxTunnelsPerSession',
    description: 'tunnels (binds) online at once in one agent session (ERR_NGROK_324 beyond)',
    default: '1000',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'agent-max-frame-bytes',
    field: 'agentMaxFrameBytes',
    description:
      'largest muxado DATA frame accepted from an agent (GOAWAY FrameSize beyond; the header allows 16 MiB)',
    default: String(4 * 1024 * 1024),
    min: 16 * 1024,
    max: 0xffffff,
  },
  {
    name: 'agent-max-rpc-bytes',
    field: 'agentMaxRpcBytes',
    description: 'bytes of one agent RPC request (Bind, Unbind, …); larger ones are refused',
    default: String(1024 * 1024),
    min: 4096,
    max: 64 * 1024 * 1024,
  },
  {
    name: 'api-max-body-bytes',
    field: 'apiMaxBodyBytes',
    description: 'bytes of an API request body (413 beyond)',
    default: String(1024 * 1024),
    min: 1024,
    max: 64 * 1024 * 1024,
  },
  {
    name: 'api-max-json-depth',
    field: 'apiMaxJsonDepth',
    description: 'nesting depth of an API JSON body (400 beyond)',
    default: '64',
    min: 4,
    max: 10_000,
  },
  {
    name: 'api-max-connections',
    field: 'apiMaxConnections',
    description: 'open API and dashboard connections in all; more are closed at once',
    default: '1024',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'api-max-connections-per-ip',
    field: 'apiMaxConnectionsPerIp',
    description: 'open API and dashboard connections per client IP',
    default: '128',
    min: 1,
    max: 1_000_000,
  },
  {
    name: 'api-headers-timeout-ms',
    field: 'apiHeadersTimeoutMs',
    description: 'API: the request line and headers must arrive within this many ms (408)',
    default: '10000',
    min: 100,
    max: 600_000,
  },
  {
    name: 'api-idle-timeout-ms',
    field: 'apiIdleTimeoutMs',
    description: 'API: a keep-alive connection with no new request for this many ms is closed',
    default: '30000',
    min: 100,
    max: 3_600_000,
  },
  {
    name: 'relay-idle-timeout-ms',
    field: 'relayIdleTimeoutMs',
    description:
      'raw relays (TCP endpoints, TLS passthrough, upgraded connections): closed after this many ms with no byte either way',
    default: '3600000',
    min: 100,
    max: 604_800_000,
  },
  {
    name: 'relay-half-closed-timeout-ms',
    field: 'relayHalfClosedTimeoutMs',
    description:
      'raw relays: once one side has sent its FIN, closed after this many ms with no byte either way',
    default: '30000',
    min: 100,
    max: 604_800_000,
  },
];

/**
 * The limits from option values (`raw(name, default)` gives a flag, variable, file value or the
 * default). Throws `fail(name, rule)` for a value that is not an integer within bounds.
 * @example parseLimits((name, def) => def, (name, rule) => new Error(`${name}: ${rule}`))
 */
export function parseLimits(
  raw: (name: string, def: string) => string,
  fail: (name: string, rule: string) => Error,
): ServerLimits {
  const out = {} as ServerLimits;
  for (const spec of LIMIT_OPTIONS) {
    const text = raw(spec.name, spec.default);
    const value = Number(text);
    if (!/^\d+$/.test(text) || value < spec.min || value > spec.max) {
      throw fail(
        spec.name,
        `${quote(text)} must be a whole number from ${spec.min} to ${spec.max}`,
      );
    }
    out[spec.field] = value;
  }
  return out;
}

/**
 * The defaults, for code that runs without a server config (tests, embedders).
 * @example startIngress({ ..., limits: DEFAULT_LIMITS })
 */
export const DEFAULT_LIMITS: ServerLimits = parseLimits(
  (_name, def) => def,
  (name, rule) => new Error(`${name}: ${rule}`),
);
