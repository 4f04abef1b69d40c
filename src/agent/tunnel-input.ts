/**
 * The body of `POST /tunnels`, checked before anything is bound: every problem is a 400 that
 * names the field and the rule. Whether the domain may be bound (reservation, ACL) is the
 * server's call, made at bind time.
 */
import { isIP } from 'node:net';
import { CODES } from '../core/errors.js';
import { parseHostPort } from '../core/host-port.js';
import { hostnameProblem, type HostnameProblem } from '../core/hostname.js';
import { LABEL_LIMITS, labelProblem, splitLabel } from '../core/labels.js';
import { AgentApiError } from './errors.js';
import { checkPolicy, TUNNEL_PROTOCOLS, type PolicyValue, type TunnelProtocol } from './policy.js';
import { parseTunnelOptions, TUNNEL_OPTION_FIELDS, type TunnelOptions } from './tunnel-options.js';

/** A create request for a tunnel on its own URL that passed every local check. */
export interface EndpointTunnelRequest {
  protocol: TunnelProtocol;
  /** As the request gave it (trimmed): what the tunnel shows. */
  forwards_to: string;
  /** Where connections go: `host:port`, with `localhost` for an empty host. */
  target: string;
  /** Lower case; a hostname (http, tls) or a reserved address `host:port` (tcp). */
  domain: string;
  /** The request's policy; null means the default policy applies. */
  policy: PolicyValue | null;
  /** The endpoint options (`basic_auth`, …) as given; undefined when there are none. */
  options?: TunnelOptions;
}

/** A create request for a labeled tunnel (a request with `labels`) that passed every local check. */
export interface LabeledTunnelRequest {
  protocol: 'labeled';
  forwards_to: string;
  target: string;
  labels: Record<string, string>;
}

/** A create request that passed every local check. */
export type TunnelRequest = EndpointTunnelRequest | LabeledTunnelRequest;

const FIELDS = [
  'protocol',
  'forwards_to',
  'domain',
  'labels',
  'policy',
  ...TUNNEL_OPTION_FIELDS,
] as const;

function invalid(field: string, message: string): AgentApiError {
  return new AgentApiError(400, `${field}: ${message}`, { code: CODES.invalidValue, field });
}

const HOSTNAME_RULES: Record<HostnameProblem, string> = {
  empty: 'is empty',
  'too-long': 'is longer than 253 characters',
  'bad-label':
    'has a label that is not 1-63 letters, digits or inner hyphens (dots separate labels)',
  'single-label': 'needs at least two labels, like device1.sitea.example.com',
  wildcard:
    'cannot be a wildcard: name one host under the reserved wildcard, like device1.sitea.example.com',
};

/**
 * Parse `forwards_to`: `<host>:<port>` with an optional host (`:8080` is localhost:8080), an IPv6
 * host in brackets, and a port 1..65535.
 * @example parseForwardsTo(':8001') // { forwards_to: ':8001', target: 'localhost:8001' }
 */
export function parseForwardsTo(value: unknown): { forwards_to: string; target: string } {
  const field = 'forwards_to';
  if (value === undefined || value === null) {
    throw invalid(field, 'is required: the local service as <host>:<port>, like localhost:8080');
  }
  if (typeof value !== 'string') {
    throw invalid(field, 'must be a string <host>:<port>, like localhost:8080');
  }
  const text = value.trim();
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    throw invalid(
      field,
      `must be <host>:<port> without a scheme, like localhost:8080 (got '${text}')`,
    );
  }
  const m = /^(\[[^\]]*\]|[^:[\]]*):([^:]*)$/.exec(text);
  if (!m) {
    throw invalid(
      field,
      `must be <host>:<port>, like localhost:8080, 192.168.1.20:80, [::1]:8080 or :8080 for localhost (got '${text}')`,
    );
  }
  const host = m[1]!;
  const portText = m[2]!;
  const port = Number(portText);
  if (!/^\d{1,5}$/.test(portText) || port < 1 || port > 65535) {
    throw invalid(field, `the port must be a number from 1 to 65535 (got '${portText}')`);
  }
  if (host.startsWith('[')) {
    if (isIP(host.slice(1, -1)) !== 6) {
      throw invalid(field, `'${host}' is not an IPv6 address in brackets`);
    }
  } else if (host !== '' && isIP(host) === 0 && !/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i.test(host)) {
    throw invalid(field, `'${host}' is not a host name or IP address`);
  }
  return { forwards_to: text, target: `${host === '' ? 'localhost' : host}:${port}` };
}

/**
 * Check `domain` for a tunnel of `protocol`: a hostname for http and tls, a reserved address
 * `host:port` for tcp. Returns it in lower case.
 * @example parseDomain('Device1.SiteA.example.com', 'http') // 'device1.sitea.example.com'
 */
export function parseDomain(value: unknown, protocol: TunnelProtocol): string {
  const field = 'domain';
  const shape =
    protocol === 'tcp'
      ? 'a reserved TCP address <host>:<port>, like tcp.example.com:20001'
      : 'a hostname under a reserved domain, like device1.sitea.example.com';
  if (value === undefined || value === null || value === '') {
    throw invalid(field, `is required: ${shape}`);
  }
  if (typeof value !== 'string') throw invalid(field, `must be a string: ${shape}`);
  const name = value.trim().toLowerCase();
  if (protocol === 'tcp') {
    const hostPort = parseHostPort(name, { minPort: 1 });
    if (!hostPort || hostnameProblem(hostPort.host, false) !== undefined) {
      throw invalid(field, `must be ${shape} (got '${value}')`);
    }
    return name;
  }
  if (name.includes(':') || name.includes('/')) {
    throw invalid(field, `must be a hostname alone, without scheme, port or path (got '${value}')`);
  }
  const problem = hostnameProblem(name, false);
  if (problem !== undefined) throw invalid(field, `'${value}' ${HOSTNAME_RULES[problem]}`);
  return name;
}

/**
 * Check `labels`: an object `{"app": "web"}`, as the management API shows a tunnel's labels and
 * takes a tunnel group's, or a list `["app=web"]`, as ngrok.yml and `burrow http --label` write
 * them; 1 to 10 labels within the server's rules (src/core/labels.ts), checked here so that a bad
 * one is a 400 naming it before anything is bound.
 * @example parseLabels(['app=web', 'site=a']) // { app: 'web', site: 'a' }
 */
export function parseLabels(value: unknown, field = 'labels'): Record<string, string> {
  const shape = 'an object of labels like {"app": "web"}, or a list like ["app=web"]';
  let entries: Array<[string, unknown, string]>;
  if (Array.isArray(value)) {
    entries = value.map((item: unknown, i) => {
      const pair = typeof item === 'string' ? splitLabel(item) : undefined;
      if (!pair) throw invalid(`${field}[${i}]`, 'must be "key=value", like "app=web"');
      return [pair[0], pair[1], `${field}[${i}]`];
    });
    const keys = entries.map(([key]) => key);
    const twice = keys.findIndex((key, i) => keys.indexOf(key) !== i);
    if (twice >= 0) throw invalid(`${field}[${twice}]`, `the key '${keys[twice]}' appears twice`);
  } else if (value !== null && typeof value === 'object') {
    entries = Object.entries(value).map(([key, v]) => [key, v, `${field}.${key}`]);
  } else {
    throw invalid(field, `must be ${shape}`);
  }
  if (entries.length === 0 || entries.length > LABEL_LIMITS.maxLabels) {
    throw invalid(field, `must have 1 to ${LABEL_LIMITS.maxLabels} labels (got ${entries.length})`);
  }
  for (const [key, v, where] of entries) {
    if (typeof v !== 'string') throw invalid(where, 'must be a string');
    const problem = labelProblem(key, v);
    if (problem) throw invalid(where, problem.message);
  }
  // fromEntries defines own properties: a key like '__proto__' stays a label, not a prototype.
  return Object.fromEntries(entries.map(([key, v]) => [key, v as string]));
}

/**
 * A labeled tunnel's request: `labels` and `forwards_to`, and nothing that belongs to an address
 * (domain, policy, endpoint options): the edge that routes to it has those. Its protocol is left
 * out or `labeled`: the edge decides too (a TCP edge sends bytes, an HTTPS edge requests).
 */
function parseLabeledRequest(fields: Record<string, unknown>): LabeledTunnelRequest {
  if (fields.protocol !== undefined && fields.protocol !== null && fields.protocol !== 'labeled') {
    throw invalid(
      'protocol',
      `a tunnel with labels has no protocol of its own (the edge that routes to it decides): leave protocol out, or give "labeled" (got ${JSON.stringify(fields.protocol)})`,
    );
  }
  const endpointOnly = FIELDS.filter(
    (f) => f !== 'protocol' && f !== 'forwards_to' && f !== 'labels' && fields[f] != null,
  );
  if (endpointOnly.length > 0) {
    throw invalid(
      endpointOnly[0]!,
      `a tunnel with labels has no address, policy or endpoint options of its own (the edge that routes to it has them): drop ${endpointOnly.join(', ')}, or drop labels for a tunnel on its own domain`,
    );
  }
  const { forwards_to, target } = parseForwardsTo(fields.forwards_to);
  return { protocol: 'labeled', forwards_to, target, labels: parseLabels(fields.labels) };
}

/**
 * Check a `POST /tunnels` body; throws a 400 {@link AgentApiError} for the first problem. The
 * policy is validated by the policy engine for the tunnel's protocol, and so are the rules of the
 * endpoint options (src/agent/tunnel-options.ts), merged before it.
 * @example parseTunnelRequest({ protocol: 'http', forwards_to: 'localhost:8001', domain: 'device1.sitea.example.com' })
 */
export function parseTunnelRequest(body: unknown): TunnelRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AgentApiError(
      400,
      'the body must be a JSON object: {"protocol": "http", "forwards_to": "<host>:<port>", "domain": "<name>", "policy": {…} (optional)}, or {"forwards_to": "<host>:<port>", "labels": {"<key>": "<value>"}} for a labeled tunnel',
      { code: CODES.invalidValue },
    );
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).find((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown !== undefined) {
    throw new AgentApiError(
      400,
      `unknown field '${unknown}'; a tunnel has the fields ${FIELDS.join(', ')}`,
      { code: CODES.unknownField, field: unknown },
    );
  }
  if (fields.labels !== undefined && fields.labels !== null) return parseLabeledRequest(fields);
  const protocolValue = fields.protocol ?? 'http';
  if (protocolValue === 'labeled') {
    throw invalid('labels', 'is required with protocol "labeled", like {"app": "web"}');
  }
  if (!(TUNNEL_PROTOCOLS as readonly unknown[]).includes(protocolValue)) {
    throw invalid(
      'protocol',
      `must be one of ${TUNNEL_PROTOCOLS.join(', ')} (got ${JSON.stringify(protocolValue)})`,
    );
  }
  const protocol = protocolValue as TunnelProtocol;
  const { forwards_to, target } = parseForwardsTo(fields.forwards_to);
  const domain = parseDomain(fields.domain, protocol);
  const policy = fields.policy ?? null;
  if (policy !== null) {
    const isObject = typeof policy === 'object' && !Array.isArray(policy);
    if (!isObject && typeof policy !== 'string') {
      throw invalid(
        'policy',
        'must be a policy object (or JSON/YAML text); leave it out for the default policy',
      );
    }
    checkPolicy(policy as PolicyValue, protocol, 'policy');
  }
  const options = parseTunnelOptions(fields, protocol, policy as PolicyValue | null);
  const request: EndpointTunnelRequest = {
    protocol,
    forwards_to,
    target,
    domain,
    policy: policy as PolicyValue | null,
  };
  if (options) request.options = options;
  return request;
}
