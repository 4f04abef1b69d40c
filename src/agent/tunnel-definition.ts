/**
 * A tunnel definition as ngrok's agent takes it, in an `ngrok.yml` (version 2 `tunnels:`,
 * version 3 `endpoints:`) or in a `POST /api/tunnels` body, checked key by key and turned into
 * what Burrow binds: a {@link TunnelDefinition}. The endpoint options (`basic_auth`,
 * `ip_restriction`, `oauth`, …) become traffic policy rules as the device agent's do
 * (tunnel-options.ts). A key Burrow cannot honour fails with what to do instead; none is dropped.
 */
import { BurrowError } from '../core/errors.js';
import { splitLabel } from '../core/labels.js';
import { parseLocalAddress } from '../sdk/forward.js';
import { AgentApiError } from './errors.js';
import { checkPolicy, type PolicyValue } from './policy.js';
import {
  parseTunnelOptions,
  redactOptions,
  TUNNEL_OPTION_FIELDS,
  tunnelTrafficPolicy,
  type TunnelOptions,
} from './tunnel-options.js';

/** What one named tunnel (or version 3 endpoint) binds and forwards to. */
export interface TunnelDefinition {
  name: string;
  /** `tunnel` from a version 2 definition or the API, `endpoint` from version 3 `endpoints:`. */
  kind: 'tunnel' | 'endpoint';
  /** http, tcp or tls; `labeled` for a tunnel with `labels` (edges route to it). */
  proto: 'http' | 'tcp' | 'tls' | 'labeled';
  /** The local service: a port, host:port or URL, as given. */
  addr: string;
  domain: string | undefined;
  /** tcp: the reserved `host:port`. */
  remoteAddr: string | undefined;
  /** http: the scheme of the public URL (`schemes`, `bind_tls`, a v3 `url`). */
  scheme: 'http' | 'https' | undefined;
  hostHeaderRewrite: boolean;
  /** `app_protocol` (v2) or `upstream.protocol` (v3): `http2` for an h2c service (gRPC). */
  appProtocol: 'http2' | undefined;
  labels: Record<string, string> | undefined;
  /** The options' rules and the definition's own `traffic_policy`, as one policy (JSON text). */
  trafficPolicy: string | undefined;
  poolingEnabled: boolean;
  /** Capture this tunnel's requests for the inspector (`inspect`, default true; http only). */
  inspect: boolean;
  metadata: string;
  /** A version 3 endpoint's `url`, as configured. */
  url: string | undefined;
  /** The endpoint options, their secrets redacted, for `config` in the API. */
  options: TunnelOptions | undefined;
}

/** Makes the error for a bad key: `key` is the path under the definition ('' for itself). */
export type DefinitionFailure = (key: string, message: string) => Error;

/** Version 2 tunnel keys Burrow cannot honour, with what to do instead. */
const UNSUPPORTED_TUNNEL_KEYS: Record<string, string> = {
  subdomain: "a Burrow agent does not know its server's base domain: give the whole name as domain",
  crt: 'TLS is terminated by the edge with the certificates of the server (docs/certificates.md); upload one with POST /certificates',
  key: 'TLS is terminated by the edge with the certificates of the server (docs/certificates.md); upload one with POST /certificates',
  terminate_at:
    'tls endpoints pass TLS through to the service; for TLS ended at the edge use an http endpoint',
  mutual_tls_cas:
    'ask for client certificates with a terminate-tls action in traffic_policy (docs/traffic-policy.md)',
  websocket_tcp_converter: 'Burrow does not convert WebSockets to TCP',
  proxy_proto: 'Burrow agents do not send the PROXY protocol to the service',
};

const TUNNEL_KEYS = new Set([
  'proto',
  'addr',
  'inspect',
  'metadata',
  'name',
  'domain',
  'hostname',
  'host_header',
  'schemes',
  'bind_tls',
  'auth',
  'verify_webhook',
  'remote_addr',
  'labels',
  'app_protocol',
  'traffic_policy',
  'pooling_enabled',
  ...TUNNEL_OPTION_FIELDS,
]);

const ENDPOINT_KEYS = new Set([
  'name',
  'description',
  'metadata',
  'url',
  'upstream',
  'traffic_policy',
  'pooling_enabled',
  'bindings',
]);

function str(fail: DefinitionFailure, key: string, value: unknown): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value === 'number') return String(value);
  if (typeof value !== 'string') throw fail(key, 'must be a string');
  return value;
}

function bool(fail: DefinitionFailure, key: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (value === true || value === 'true') return true;
  if (value === false || value === 'false') return false;
  throw fail(key, 'must be true or false');
}

function checkAddr(fail: DefinitionFailure, key: string, addr: string | undefined): string {
  if (addr === undefined)
    throw fail(key, 'is required: the local port, host:port or URL to forward to');
  try {
    parseLocalAddress(addr);
  } catch (err) {
    throw fail(key, (err as Error).message);
  }
  return addr;
}

function policyOf(fail: DefinitionFailure, key: string, value: unknown): PolicyValue | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string' || (typeof value === 'object' && !Array.isArray(value))) {
    return value as PolicyValue;
  }
  throw fail(key, 'must be a traffic policy document (a mapping, or YAML/JSON text)');
}

/** The options and policy as one policy; an option or policy the engine refuses names its key. */
function combinedPolicy(
  fail: DefinitionFailure,
  fields: Record<string, unknown>,
  proto: 'http' | 'tcp' | 'tls',
  policy: PolicyValue | undefined,
): { options: TunnelOptions | undefined; trafficPolicy: string | undefined } {
  try {
    const options = parseTunnelOptions(fields, proto, policy ?? null);
    if (policy !== undefined && !options) checkPolicy(policy, proto, 'traffic_policy');
    const trafficPolicy = tunnelTrafficPolicy(
      options,
      proto,
      policy === undefined ? undefined : { field: 'traffic_policy', value: policy },
    );
    return { options, trafficPolicy };
  } catch (err) {
    if (err instanceof AgentApiError) throw fail(err.field ?? '', err.message);
    if (err instanceof BurrowError) throw fail('traffic_policy', err.message);
    throw err;
  }
}

function labelsOf(fail: DefinitionFailure, value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  const list = Array.isArray(value) ? value : undefined;
  if (!list || list.length === 0) throw fail('labels', 'must be a list of key=value');
  const labels: Record<string, string> = {};
  list.forEach((item: unknown, i) => {
    const pair = typeof item === 'string' ? splitLabel(item) : undefined;
    if (!pair) throw fail(`labels[${i}]`, 'must be key=value');
    labels[pair[0]] = pair[1];
  });
  return labels;
}

/** http `schemes` / `bind_tls` as one scheme; both schemes at once is not something Burrow binds. */
function schemeOf(
  fail: DefinitionFailure,
  fields: Record<string, unknown>,
): 'http' | 'https' | undefined {
  if (fields.schemes !== undefined) {
    const list = fields.schemes;
    if (
      !Array.isArray(list) ||
      list.some((s) => s !== 'http' && s !== 'https') ||
      list.length === 0
    ) {
      throw fail('schemes', 'must be a list of http and/or https');
    }
    if (list.length > 1 && new Set(list).size > 1) {
      throw fail(
        'schemes',
        'Burrow binds one scheme per endpoint: give [https] or [http] (define two tunnels for both)',
      );
    }
    return list[0] as 'http' | 'https';
  }
  if (fields.bind_tls === undefined) return undefined;
  if (fields.bind_tls === 'both') {
    throw fail(
      'bind_tls',
      'Burrow binds one scheme per endpoint: give true (https) or false (http)',
    );
  }
  return bool(fail, 'bind_tls', fields.bind_tls, true) ? 'https' : 'http';
}

/**
 * A version 2 tunnel definition (also the body of `POST /api/tunnels`).
 * @example definitionFromTunnel('web', { proto: 'http', addr: 8080 }, fail).addr // '8080'
 */
export function definitionFromTunnel(
  name: string,
  fields: Record<string, unknown>,
  fail: DefinitionFailure,
): TunnelDefinition {
  for (const key of Object.keys(fields)) {
    const why = UNSUPPORTED_TUNNEL_KEYS[key];
    if (why) throw fail(key, `${key} is not supported: ${why}`);
    if (!TUNNEL_KEYS.has(key)) throw fail(key, `unknown key ${key}`);
  }
  const labels = labelsOf(fail, fields.labels);
  const proto = str(fail, 'proto', fields.proto);
  // A labeled tunnel may leave proto out (the edge that routes to it has one), not give another.
  if (proto === undefined ? !labels : proto !== 'http' && proto !== 'tcp' && proto !== 'tls') {
    throw fail(
      'proto',
      proto === undefined
        ? 'is required: http, tcp or tls'
        : `must be http, tcp or tls, not ${JSON.stringify(proto)}`,
    );
  }
  const addr = checkAddr(fail, 'addr', str(fail, 'addr', fields.addr));
  const { auth, verify_webhook: verifyWebhook, ...rest } = fields;
  const optionFields: Record<string, unknown> = Object.fromEntries(
    Object.entries(rest).filter(([k]) => (TUNNEL_OPTION_FIELDS as readonly string[]).includes(k)),
  );
  // Older ngrok names for two options.
  if (auth !== undefined) {
    if (typeof auth !== 'string') throw fail('auth', 'must be user:password');
    optionFields.basic_auth = [auth, ...((optionFields.basic_auth as unknown[] | undefined) ?? [])];
  }
  if (verifyWebhook !== undefined) optionFields.webhook_verification = verifyWebhook;
  const domain = str(fail, 'domain', fields.domain) ?? str(fail, 'hostname', fields.hostname);
  const hostHeader = str(fail, 'host_header', fields.host_header);
  if (hostHeader !== undefined && hostHeader !== 'rewrite' && hostHeader !== 'preserve') {
    throw fail(
      'host_header',
      "must be rewrite or preserve (to set another Host, use request_header: {remove: [host], add: ['host: name']})",
    );
  }
  const policy = policyOf(fail, 'traffic_policy', fields.traffic_policy);
  if (labels) {
    const endpointOnly = [
      'domain',
      'hostname',
      'remote_addr',
      'traffic_policy',
      'host_header',
      ...TUNNEL_OPTION_FIELDS,
    ].filter((k) => fields[k] !== undefined);
    if (endpointOnly.length > 0) {
      throw fail(
        endpointOnly[0]!,
        'a labeled tunnel has no address or policy of its own (the edge that routes to it has them)',
      );
    }
  }
  const bindProto = (proto ?? 'http') as 'http' | 'tcp' | 'tls';
  if (bindProto !== 'http') {
    for (const key of ['schemes', 'bind_tls', 'host_header'] as const) {
      if (fields[key] !== undefined) throw fail(key, `applies to http tunnels only`);
    }
  }
  if (fields.remote_addr !== undefined && bindProto !== 'tcp')
    throw fail('remote_addr', 'applies to tcp tunnels only');
  const { options, trafficPolicy } = labels
    ? { options: undefined, trafficPolicy: undefined }
    : combinedPolicy(fail, optionFields, bindProto, policy);
  return {
    name,
    kind: 'tunnel',
    proto: labels ? 'labeled' : bindProto,
    addr,
    domain,
    remoteAddr: str(fail, 'remote_addr', fields.remote_addr),
    scheme: bindProto === 'http' ? schemeOf(fail, fields) : undefined,
    hostHeaderRewrite: hostHeader === 'rewrite',
    appProtocol: appProtocolOf(fail, 'app_protocol', fields.app_protocol, bindProto),
    labels,
    trafficPolicy,
    poolingEnabled: bool(fail, 'pooling_enabled', fields.pooling_enabled, false),
    inspect: bool(fail, 'inspect', fields.inspect, true),
    metadata: str(fail, 'metadata', fields.metadata) ?? '',
    url: undefined,
    options: options && redactOptions(options),
  };
}

/**
 * The app protocol of `key` (ngrok's `http1` or `http2`): `http2` for HTTP endpoints and labeled
 * tunnels only.
 */
function appProtocolOf(
  fail: DefinitionFailure,
  key: string,
  value: unknown,
  proto: string,
): 'http2' | undefined {
  if (value === undefined || value === 'http1') return undefined;
  if (value !== 'http2') throw fail(key, 'must be http1 or http2');
  if (proto === 'tcp' || proto === 'tls') throw fail(key, 'applies to http endpoints only');
  return 'http2';
}

/** A version 3 endpoint `url` as a protocol, scheme and name or address. */
function parseEndpointUrl(
  fail: DefinitionFailure,
  url: string | undefined,
): Pick<TunnelDefinition, 'proto' | 'scheme' | 'domain' | 'remoteAddr'> {
  if (url === undefined)
    return { proto: 'http', scheme: 'https', domain: undefined, remoteAddr: undefined };
  const m = /^(https?|tcp|tls):\/\/([^/]*)\/?$/i.exec(url.trim());
  if (!m) {
    if (/^[a-z0-9.*-]+$/i.test(url))
      return { proto: 'http', scheme: 'https', domain: url, remoteAddr: undefined };
    throw fail(
      'url',
      `must be https://name, http://name, tcp://host:port or tls://name, not ${JSON.stringify(url)}`,
    );
  }
  const scheme = m[1]!.toLowerCase();
  const host = m[2]!;
  if (host.endsWith('.internal')) {
    throw fail(
      'url',
      'internal endpoints (.internal) are made with the API (burrow endpoint create), not by the agent',
    );
  }
  if (scheme === 'tcp')
    return {
      proto: 'tcp',
      scheme: undefined,
      domain: undefined,
      remoteAddr: host === '' ? undefined : host,
    };
  if (scheme === 'tls')
    return {
      proto: 'tls',
      scheme: undefined,
      domain: host.replace(/:443$/, '') || undefined,
      remoteAddr: undefined,
    };
  return {
    proto: 'http',
    scheme: scheme as 'http' | 'https',
    domain: host.replace(/:(80|443)$/, '') || undefined,
    remoteAddr: undefined,
  };
}

/**
 * A version 3 `endpoints:` entry.
 * @example definitionFromEndpoint({ name: 'api', url: 'https://api.example.com', upstream: { url: 8080 } }, 0, fail).domain // 'api.example.com'
 */
export function definitionFromEndpoint(
  fields: Record<string, unknown>,
  index: number,
  fail: DefinitionFailure,
): TunnelDefinition {
  for (const key of Object.keys(fields)) {
    if (!ENDPOINT_KEYS.has(key)) throw fail(key, `unknown key ${key}`);
  }
  const name = str(fail, 'name', fields.name) ?? `endpoint-${index + 1}`;
  const upstream = fields.upstream;
  if (
    upstream === undefined ||
    upstream === null ||
    typeof upstream !== 'object' ||
    Array.isArray(upstream)
  ) {
    throw fail('upstream', 'is required: a mapping with url (the local port, host:port or URL)');
  }
  const up = upstream as Record<string, unknown>;
  for (const key of Object.keys(up)) {
    if (key === 'url') continue;
    if (key === 'protocol') continue; // read by appProtocolOf below
    if (key === 'proxy_protocol')
      throw fail('upstream.proxy_protocol', UNSUPPORTED_TUNNEL_KEYS.proxy_proto!);
    throw fail(`upstream.${key}`, `unknown key ${key}`);
  }
  const addr = checkAddr(fail, 'upstream.url', str(fail, 'upstream.url', up.url));
  if (fields.bindings !== undefined) {
    const b = fields.bindings;
    if (!Array.isArray(b) || b.some((x) => x !== 'public')) {
      throw fail(
        'bindings',
        "Burrow's agent binds public endpoints only (internal endpoints are made with the API): give [public] or leave it out",
      );
    }
  }
  const url = str(fail, 'url', fields.url);
  const target = parseEndpointUrl(fail, url);
  const appProtocol = appProtocolOf(fail, 'upstream.protocol', up.protocol, target.proto);
  const proto = target.proto as 'http' | 'tcp' | 'tls';
  const policy = policyOf(fail, 'traffic_policy', fields.traffic_policy);
  const { trafficPolicy } = combinedPolicy(fail, {}, proto, policy);
  return {
    name,
    kind: 'endpoint',
    ...target,
    addr,
    hostHeaderRewrite: false,
    appProtocol,
    labels: undefined,
    trafficPolicy,
    poolingEnabled: bool(fail, 'pooling_enabled', fields.pooling_enabled, false),
    inspect: true,
    metadata: str(fail, 'metadata', fields.metadata) ?? '',
    url,
    options: undefined,
  };
}
