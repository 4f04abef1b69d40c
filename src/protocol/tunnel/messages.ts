import { HEARTBEAT_STREAM_TYPE } from './typed.js';

/**
 * The tunnel RPC messages (docs/protocol.md §5–§6) with canonical PascalCase keys.
 *
 * Canonical spelling: Rust's where the Rust SDK has the field (it is the only case-sensitive
 * reader), Go's otherwise. Go decodes keys case-insensitively, so anything built or echoed in
 * canonical form is read correctly by both (e.g. `AuthToken`, not Go's `Authtoken`;
 * `LocalUrlScheme`, not `LocalURLScheme`). decodeMessage() maps any casing onto these keys.
 *
 * Fields are optional because peers omit what they lack; durations are int64 nanoseconds; byte
 * fields are base64 strings. Values are not checked here: the edge validates what it uses.
 */

/** Stream types of the tunnel RPC layer (docs/protocol.md §5.1). */
export const StreamType = {
  Auth: 0,
  Bind: 1,
  Unbind: 2,
  Proxy: 3,
  Restart: 4,
  Stop: 5,
  Update: 6,
  StartTunnelWithLabel: 7,
  SrvInfo: 8,
  StopTunnel: 9,
  PatchTunnelState: 10,
  Heartbeat: HEARTBEAT_STREAM_TYPE,
} as const;

export interface Auth {
  Version?: string[];
  ClientId?: string;
  Extra?: AuthExtra;
}

export interface AuthExtra {
  OS?: string;
  Arch?: string;
  AuthToken?: string;
  Version?: string;
  Hostname?: string;
  UserAgent?: string;
  Metadata?: string;
  Cookie?: string;
  HeartbeatInterval?: number;
  HeartbeatTolerance?: number;
  /** null: agent too old; "": supported; other text: why it is not supported. */
  UpdateUnsupportedError?: string | null;
  StopUnsupportedError?: string | null;
  RestartUnsupportedError?: string | null;
  ProxyType?: string;
  MutualTLS?: boolean;
  ServiceRun?: boolean;
  ConfigVersion?: string;
  CustomInterface?: boolean;
  CustomCAs?: boolean;
  ClientType?: string;
  LegNumber?: number;
  Fingerprint?: { M?: string[]; D?: string[] } | null;
}

export interface AuthResp {
  Version: string;
  ClientId: string;
  Error?: string;
  Extra?: AuthRespExtra;
}

export interface AuthRespExtra {
  Version?: string;
  Region?: string;
  Cookie?: string;
  AccountName?: string;
  SessionDuration?: number;
  PlanName?: string;
  Banner?: string;
  DeprecationWarning?: { NextMin?: string; NextDate?: string; Msg?: string } | null;
  ConnectAddresses?: { Region?: string; ServerAddr?: string }[];
  AgentSessionID?: string;
}

/** Middleware and policy values are passed through untouched (their inner keys are snake_case). */
export type Opaque = unknown;

/** Bind options: the union of the http/https, tcp and tls endpoint keys. */
export interface BindOpts {
  URL?: string;
  Domain?: string;
  Hostname?: string;
  Subdomain?: string;
  Addr?: string;
  Auth?: string;
  HostHeaderRewrite?: boolean;
  LocalUrlScheme?: string | null;
  ProxyProto?: number;
  MutualTLSAtAgent?: boolean;
  Compression?: Opaque;
  CircuitBreaker?: Opaque;
  IPRestriction?: Opaque;
  BasicAuth?: Opaque;
  OAuth?: Opaque;
  OIDC?: Opaque;
  WebhookVerification?: Opaque;
  MutualTLSCA?: Opaque;
  MutualTLSAtEdge?: Opaque;
  TLSTermination?: Opaque;
  RequestHeaders?: Opaque;
  ResponseHeaders?: Opaque;
  WebsocketTCPConverter?: Opaque;
  UserAgentFilter?: Opaque;
  Policy?: Opaque;
  /** Traffic policy text (YAML or JSON); Rust may send a legacy object instead. */
  TrafficPolicy?: Opaque;
}

export interface Bind {
  Id?: string;
  Proto?: string;
  ForwardsTo?: string;
  ForwardsProto?: string;
  Opts?: BindOpts;
  Extra?: BindExtra;
}

export interface BindExtra {
  Name?: string;
  Token?: string;
  IPPolicyRef?: string;
  Metadata?: string;
  Description?: string;
  Bindings?: string[];
  PoolingEnabled?: boolean;
}

export interface BindResp {
  Id: string;
  URL: string;
  Proto: string;
  Opts?: BindOpts;
  Error?: string;
  Extra: { Token: string; TunnelID?: string };
}

export interface Unbind {
  Id?: string;
  Extra?: Opaque;
}

export interface UnbindResp {
  Error?: string;
  Extra?: Opaque;
}

export interface StartTunnelWithLabel {
  /** User labels: keys are kept exactly as sent. */
  Labels?: Record<string, string>;
  ForwardsTo?: string;
  ForwardsProto?: string;
  Metadata?: string;
}

export interface StartTunnelWithLabelResp {
  Id: string;
  Error?: string;
}

/** Written by the server at the start of each proxied connection (type 3). */
export interface ProxyHeader {
  Id: string;
  ClientAddr: string;
  Proto: string;
  /** A string: "" or "0" endpoint, "1" TCP, "2" TLS, "3" HTTPS edge. */
  EdgeType: string;
  PassthroughTLS: boolean;
}

export type Restart = Record<string, never>;
export type Stop = Record<string, never>;
export interface Update {
  Version?: string;
  PermitMajorVersion?: boolean;
}
/** Reply to Restart, Stop and Update. */
export interface CommandResp {
  Error?: string;
}
export type RestartResp = CommandResp;
export type StopResp = CommandResp;
export type UpdateResp = CommandResp;

export interface StopTunnel {
  Id: string;
  Message: string;
  ErrorCode?: string | null;
}

export type SrvInfo = Record<string, never>;
export interface SrvInfoResp {
  Region: string;
  Error?: string;
}

export interface PatchTunnelState {
  TunnelId?: string;
  Name?: string;
  Description?: string;
  Metadata?: string;
  PoolingEnabled?: boolean;
  TrafficPolicy?: string;
}

export interface PatchTunnelStateResp {
  Error?: string;
}

/** Every message by name, for decodeMessage(). */
export interface MessageTypes {
  Auth: Auth;
  AuthResp: AuthResp;
  Bind: Bind;
  BindResp: BindResp;
  Unbind: Unbind;
  UnbindResp: UnbindResp;
  StartTunnelWithLabel: StartTunnelWithLabel;
  StartTunnelWithLabelResp: StartTunnelWithLabelResp;
  ProxyHeader: ProxyHeader;
  Restart: Restart;
  RestartResp: RestartResp;
  Stop: Stop;
  StopResp: StopResp;
  Update: Update;
  UpdateResp: UpdateResp;
  StopTunnel: StopTunnel;
  SrvInfo: SrvInfo;
  SrvInfoResp: SrvInfoResp;
  PatchTunnelState: PatchTunnelState;
  PatchTunnelStateResp: PatchTunnelStateResp;
}
export type MessageName = keyof MessageTypes;

// ---- case-insensitive decoding -----------------------------------------------------------

/** Canonical keys of an object, with the shape of each value (null: kept as it is). */
interface Shape {
  keys: Map<string, { name: string; shape: Shape | null }>;
}

function shape(fields: Record<string, Shape | null>): Shape {
  const keys = new Map<string, { name: string; shape: Shape | null }>();
  for (const [name, inner] of Object.entries(fields)) {
    keys.set(name.toLowerCase(), { name, shape: inner });
  }
  return { keys };
}

function leaves(...names: string[]): Record<string, null> {
  return Object.fromEntries(names.map((n) => [n, null]));
}

const AUTH_EXTRA = shape({
  ...leaves('OS', 'Arch', 'AuthToken', 'Version', 'Hostname', 'UserAgent', 'Metadata', 'Cookie'),
  ...leaves('HeartbeatInterval', 'HeartbeatTolerance', 'UpdateUnsupportedError'),
  ...leaves('StopUnsupportedError', 'RestartUnsupportedError', 'ProxyType', 'MutualTLS'),
  ...leaves('ServiceRun', 'ConfigVersion', 'CustomInterface', 'CustomCAs', 'ClientType'),
  LegNumber: null,
  Fingerprint: shape(leaves('M', 'D')),
});

const AUTH_RESP_EXTRA = shape({
  ...leaves('Version', 'Region', 'Cookie', 'AccountName', 'SessionDuration', 'PlanName'),
  ...leaves('Banner', 'AgentSessionID'),
  DeprecationWarning: shape(leaves('NextMin', 'NextDate', 'Msg')),
  ConnectAddresses: shape(leaves('Region', 'ServerAddr')),
});

const BIND_OPTS = shape({
  ...leaves('URL', 'Domain', 'Hostname', 'Subdomain', 'Addr', 'Auth', 'HostHeaderRewrite'),
  ...leaves('LocalUrlScheme', 'ProxyProto', 'MutualTLSAtAgent', 'Compression', 'CircuitBreaker'),
  ...leaves('IPRestriction', 'BasicAuth', 'OAuth', 'OIDC', 'WebhookVerification', 'MutualTLSCA'),
  ...leaves('MutualTLSAtEdge', 'TLSTermination', 'RequestHeaders', 'ResponseHeaders'),
  ...leaves('WebsocketTCPConverter', 'UserAgentFilter', 'Policy', 'TrafficPolicy'),
});

const ERROR_ONLY = shape(leaves('Error'));

const SHAPES: Record<MessageName, Shape> = {
  Auth: shape({ ...leaves('Version', 'ClientId'), Extra: AUTH_EXTRA }),
  AuthResp: shape({ ...leaves('Version', 'ClientId', 'Error'), Extra: AUTH_RESP_EXTRA }),
  Bind: shape({
    ...leaves('Id', 'Proto', 'ForwardsTo', 'ForwardsProto'),
    Opts: BIND_OPTS,
    Extra: shape(
      leaves(
        'Name',
        'Token',
        'IPPolicyRef',
        'Metadata',
        'Description',
        'Bindings',
        'PoolingEnabled',
      ),
    ),
  }),
  BindResp: shape({
    ...leaves('Id', 'URL', 'Proto', 'Error'),
    Opts: BIND_OPTS,
    Extra: shape(leaves('Token', 'TunnelID')),
  }),
  Unbind: shape(leaves('Id', 'Extra')),
  UnbindResp: shape(leaves('Error', 'Extra')),
  StartTunnelWithLabel: shape(leaves('Labels', 'ForwardsTo', 'ForwardsProto', 'Metadata')),
  StartTunnelWithLabelResp: shape(leaves('Id', 'Error')),
  ProxyHeader: shape(leaves('Id', 'ClientAddr', 'Proto', 'EdgeType', 'PassthroughTLS')),
  Restart: shape({}),
  RestartResp: ERROR_ONLY,
  Stop: shape({}),
  StopResp: ERROR_ONLY,
  Update: shape(leaves('Version', 'PermitMajorVersion')),
  UpdateResp: ERROR_ONLY,
  StopTunnel: shape(leaves('Id', 'Message', 'ErrorCode')),
  SrvInfo: shape({}),
  SrvInfoResp: shape(leaves('Region', 'Error')),
  PatchTunnelState: shape(
    leaves('TunnelId', 'Name', 'Description', 'Metadata', 'PoolingEnabled', 'TrafficPolicy'),
  ),
  PatchTunnelStateResp: ERROR_ONLY,
};

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function canonicalize(value: unknown, into: Shape): unknown {
  if (Array.isArray(value)) return value.map((item) => canonicalize(item, into));
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    const known = into.keys.get(key.toLowerCase());
    if (!known) {
      out[key] = inner; // unknown keys are kept: new fields must not break anything
      continue;
    }
    out[known.name] = known.shape ? canonicalize(inner, known.shape) : inner;
  }
  return out;
}

/**
 * Decode a parsed message: keys are matched case-insensitively (as Go does) and renamed to their
 * canonical spelling, also inside Extra, Opts and their nested objects. Opaque values (Labels,
 * middleware, policies) are kept exactly as sent. Throws TypeError when `raw` is not an object.
 *
 * @example
 * decodeMessage('Auth', { extra: { Authtoken: 't' } }) // { Extra: { AuthToken: 't' } }
 */
export function decodeMessage<K extends MessageName>(name: K, raw: unknown): MessageTypes[K] {
  if (!isPlainObject(raw)) throw new TypeError(`${name} must be a JSON object`);
  return canonicalize(raw, SHAPES[name]) as MessageTypes[K];
}
