/**
 * The endpoint options of a device-agent tunnel: the optional `POST /tunnels` fields named as
 * ngrok's agent config names them in a tunnel definition (`basic_auth`, `ip_restriction`,
 * `request_header`, `response_header`, `compression`, `circuit_breaker`, `user_agent_filter`,
 * `webhook_verification`, `oauth`, `oidc`). They become the same traffic policy rules as the
 * `burrow http` flags (src/policy/endpoint-options.ts), placed before the tunnel's own policy (or
 * the default policy where that applies). http tunnels take every option; tcp and tls tunnels
 * take `ip_restriction` only.
 *
 * The options are stored as given (with their secrets, the state file is mode 0600) and shown
 * without secrets: {@link redactOptions}.
 */
import { BurrowError, CODES } from '../core/errors.js';
import {
  EndpointOptionError,
  optionRules,
  type EndpointOptionKey,
  type EndpointOptions,
  type OptionNaming,
  type OptionRules,
} from '../policy/endpoint-options.js';
import { trafficPolicyWithRules } from '../policy/option-rules-merge.js';
import { isMapping } from '../policy/actions/config.js';
import { AgentApiError } from './errors.js';
import { policyJson, type PolicyValue, type TunnelProtocol } from './policy.js';

/** The option fields of a tunnel, as ngrok's agent config names them. */
export interface TunnelOptions {
  basic_auth?: string[];
  ip_restriction?: { allow_cidrs?: string[]; deny_cidrs?: string[] };
  request_header?: { add?: string[]; remove?: string[] };
  response_header?: { add?: string[]; remove?: string[] };
  compression?: boolean;
  circuit_breaker?: number;
  user_agent_filter?: { allow?: string[]; deny?: string[] };
  webhook_verification?: { provider: string; secret: string };
  oauth?: LoginOptions & { provider: string };
  oidc?: LoginOptions & { issuer_url: string };
}

interface LoginOptions {
  client_id: string;
  client_secret: string;
  scopes?: string[];
  allow_emails?: string[];
  allow_domains?: string[];
}

/** The option fields, in the order the reply shows them. */
export const TUNNEL_OPTION_FIELDS = [
  'basic_auth',
  'ip_restriction',
  'request_header',
  'response_header',
  'compression',
  'circuit_breaker',
  'user_agent_filter',
  'webhook_verification',
  'oauth',
  'oidc',
] as const satisfies ReadonlyArray<keyof TunnelOptions>;

/** Where replies show a secret. */
export const REDACTED = '[redacted]';

const NAMES: Record<EndpointOptionKey, string> = {
  basicAuth: 'basic_auth',
  cidrAllow: 'ip_restriction.allow_cidrs',
  cidrDeny: 'ip_restriction.deny_cidrs',
  requestHeaderAdd: 'request_header.add',
  requestHeaderRemove: 'request_header.remove',
  responseHeaderAdd: 'response_header.add',
  responseHeaderRemove: 'response_header.remove',
  compression: 'compression',
  uaFilterAllow: 'user_agent_filter.allow',
  uaFilterDeny: 'user_agent_filter.deny',
  circuitBreaker: 'circuit_breaker',
  oauth: 'oauth',
  oauthClientId: 'oauth.client_id',
  oauthClientSecret: 'oauth.client_secret',
  oauthScope: 'oauth.scopes',
  oauthAllowEmail: 'oauth.allow_emails',
  oauthAllowDomain: 'oauth.allow_domains',
  oidc: 'oidc',
  oidcClientId: 'oidc.client_id',
  oidcClientSecret: 'oidc.client_secret',
  oidcScope: 'oidc.scopes',
  oidcAllowEmail: 'oidc.allow_emails',
  oidcAllowDomain: 'oidc.allow_domains',
  verifyWebhook: 'webhook_verification',
  verifyWebhookSecret: 'webhook_verification.secret',
};

/** Rules and errors name the body field, list elements by index (`basic_auth[0]`). */
const FIELD_NAMING: OptionNaming = {
  name: (key, index) => (index === undefined ? NAMES[key] : `${NAMES[key]}[${index}]`),
  example: (_key, value) => JSON.stringify(value),
};

function invalid(field: string, message: string): AgentApiError {
  return new AgentApiError(400, `${field}: ${message}`, { code: CODES.invalidValue, field });
}

/** An object field with only `keys`; null is absent. */
function object(
  field: string,
  value: unknown,
  keys: readonly string[],
): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isMapping(value)) {
    throw invalid(field, `must be an object with the fields ${keys.join(', ')}`);
  }
  const unknown = Object.keys(value).find((k) => !keys.includes(k));
  if (unknown !== undefined) {
    throw new AgentApiError(
      400,
      `unknown field '${field}.${unknown}'; ${field} has the fields ${keys.join(', ')}`,
      { code: CODES.unknownField, field: `${field}.${unknown}` },
    );
  }
  return value;
}

/** A list of non-empty strings (at most 100); null is absent. */
function strings(field: string, value: unknown, what: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw invalid(field, `must be a list of ${what}`);
  if (value.length > 100) throw invalid(field, `has ${value.length} entries; at most 100`);
  value.forEach((item, i) => {
    if (typeof item !== 'string' || item.trim() === '') {
      throw invalid(`${field}[${i}]`, `must be a non-empty string: ${what.replace(/s$/, '')}`);
    }
  });
  return value as string[];
}

/** A required non-empty string. */
function text(field: string, value: unknown, what: string): string {
  if (value === undefined || value === null || value === '') {
    throw invalid(field, `is required: ${what}`);
  }
  if (typeof value !== 'string' || value.trim() === '') {
    throw invalid(field, `must be a non-empty string: ${what}`);
  }
  return value;
}

/** Copy `value` without the keys whose value is undefined. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** A non-empty object, or undefined. */
const nonEmpty = <T extends object>(value: T): T | undefined =>
  Object.keys(value).length > 0 ? value : undefined;

function login<K extends 'oauth' | 'oidc'>(
  field: K,
  value: unknown,
): Required<TunnelOptions>[K] | undefined {
  const first = field === 'oauth' ? 'provider' : 'issuer_url';
  const o = object(field, value, [
    first,
    'client_id',
    'client_secret',
    'scopes',
    'allow_emails',
    'allow_domains',
  ]);
  if (!o) return undefined;
  const out = {
    [first]: text(
      `${field}.${first}`,
      o[first],
      field === 'oauth'
        ? 'the OAuth provider, like google or github'
        : 'the issuer URL, like https://accounts.example.com',
    ),
    client_id: text(
      `${field}.client_id`,
      o.client_id,
      'the id of the app registered with the provider (Burrow runs no managed OAuth app)',
    ),
    client_secret: text(
      `${field}.client_secret`,
      o.client_secret,
      "the app's secret (the session cookies are encrypted with a key derived from it)",
    ),
    scopes: strings(`${field}.scopes`, o.scopes, 'scopes'),
    allow_emails: strings(`${field}.allow_emails`, o.allow_emails, 'email addresses'),
    allow_domains: strings(`${field}.allow_domains`, o.allow_domains, 'domains'),
  };
  return defined(out) as unknown as Required<TunnelOptions>[K];
}

/**
 * The option fields of a create body, checked for their shape; undefined when it has none. Each
 * problem is a 400 naming the field (`request_header.add[1]`).
 */
function shapeOf(
  fields: Record<string, unknown>,
  protocol: TunnelProtocol,
): TunnelOptions | undefined {
  if (protocol !== 'http') {
    const httpOnly = TUNNEL_OPTION_FIELDS.find(
      (f) => f !== 'ip_restriction' && fields[f] !== undefined && fields[f] !== null,
    );
    if (httpOnly !== undefined) {
      throw invalid(
        httpOnly,
        `applies to http tunnels only; a ${protocol} tunnel takes ip_restriction alone`,
      );
    }
  }
  const ip = object('ip_restriction', fields.ip_restriction, ['allow_cidrs', 'deny_cidrs']);
  const headers = (field: 'request_header' | 'response_header') => {
    const o = object(field, fields[field], ['add', 'remove']);
    return (
      o &&
      defined({
        add: strings(`${field}.add`, o.add, 'headers as "name:value"'),
        remove: strings(`${field}.remove`, o.remove, 'header names'),
      })
    );
  };
  const ua = object('user_agent_filter', fields.user_agent_filter, ['allow', 'deny']);
  const hook = object('webhook_verification', fields.webhook_verification, ['provider', 'secret']);
  const compression = fields.compression ?? undefined;
  if (compression !== undefined && typeof compression !== 'boolean') {
    throw invalid('compression', 'must be true or false');
  }
  const breaker = fields.circuit_breaker ?? undefined;
  if (breaker !== undefined && (typeof breaker !== 'number' || !Number.isFinite(breaker))) {
    throw invalid(
      'circuit_breaker',
      'must be a number: the ratio of 5xx responses that opens the breaker, above 0 and at most 1 (e.g. 0.5)',
    );
  }
  const options: TunnelOptions = defined({
    basic_auth: strings('basic_auth', fields.basic_auth, 'credentials as "user:password"'),
    ip_restriction:
      ip &&
      defined({
        allow_cidrs: strings('ip_restriction.allow_cidrs', ip.allow_cidrs, 'CIDR blocks'),
        deny_cidrs: strings('ip_restriction.deny_cidrs', ip.deny_cidrs, 'CIDR blocks'),
      }),
    request_header: headers('request_header'),
    response_header: headers('response_header'),
    compression,
    circuit_breaker: breaker,
    user_agent_filter:
      ua &&
      defined({
        allow: strings('user_agent_filter.allow', ua.allow, 'regular expressions'),
        deny: strings('user_agent_filter.deny', ua.deny, 'regular expressions'),
      }),
    webhook_verification: hook && {
      provider: text(
        'webhook_verification.provider',
        hook.provider,
        'the webhook provider, like github or stripe',
      ),
      secret: text('webhook_verification.secret', hook.secret, 'the webhook signing secret'),
    },
    oauth: login('oauth', fields.oauth),
    oidc: login('oidc', fields.oidc),
  });
  return nonEmpty(options);
}

/** The options in the shared translation's terms. */
function endpointOptions(options: TunnelOptions): EndpointOptions {
  const { oauth, oidc } = options;
  return defined({
    basicAuth: options.basic_auth,
    cidrAllow: options.ip_restriction?.allow_cidrs,
    cidrDeny: options.ip_restriction?.deny_cidrs,
    requestHeaderAdd: options.request_header?.add,
    requestHeaderRemove: options.request_header?.remove,
    responseHeaderAdd: options.response_header?.add,
    responseHeaderRemove: options.response_header?.remove,
    compression: options.compression,
    circuitBreaker: options.circuit_breaker,
    uaFilterAllow: options.user_agent_filter?.allow,
    uaFilterDeny: options.user_agent_filter?.deny,
    verifyWebhook: options.webhook_verification?.provider,
    verifyWebhookSecret: options.webhook_verification?.secret,
    oauth: oauth?.provider,
    oauthClientId: oauth?.client_id,
    oauthClientSecret: oauth?.client_secret,
    oauthScope: oauth?.scopes,
    oauthAllowEmail: oauth?.allow_emails,
    oauthAllowDomain: oauth?.allow_domains,
    oidc: oidc?.issuer_url,
    oidcClientId: oidc?.client_id,
    oidcClientSecret: oidc?.client_secret,
    oidcScope: oidc?.scopes,
    oidcAllowEmail: oidc?.allow_emails,
    oidcAllowDomain: oidc?.allow_domains,
  });
}

/** An error of the shared translation or the policy engine as a 400 naming the field. */
function asApiError(err: unknown, field: string | undefined): unknown {
  if (err instanceof EndpointOptionError) {
    return new AgentApiError(400, err.message, { code: err.code, field: err.field });
  }
  if (err instanceof BurrowError && !(err instanceof AgentApiError)) {
    return new AgentApiError(400, err.message, { code: err.code, field });
  }
  return err;
}

/** The rules that enforce `options` on a tunnel of `protocol`, named after the fields. */
export function tunnelOptionRules(options: TunnelOptions, protocol: TunnelProtocol): OptionRules {
  return optionRules(endpointOptions(options), protocol, FIELD_NAMING);
}

/**
 * The traffic policy a tunnel is bound with: the options' rules first, then `policy` (the
 * tunnel's own, or the default policy's JSON, or none). Without options, the policy unchanged.
 * Throws a 400 {@link AgentApiError} naming the field for an option or a merge the engine refuses.
 * @example tunnelTrafficPolicy({ basic_auth: ['ops:correct-horse'] }, 'http', undefined)
 *   // '{"on_http_request":[{"name":"basic_auth",…}]}'
 */
export function tunnelTrafficPolicy(
  options: TunnelOptions | undefined,
  protocol: TunnelProtocol,
  policy: { field: string; value: PolicyValue } | undefined,
): string | undefined {
  const own = policy && { field: policy.field, text: policyJson(policy.value) };
  if (!options) return own?.text;
  try {
    return trafficPolicyWithRules(
      tunnelOptionRules(options, protocol),
      protocol,
      own,
      `the tunnel options with ${policy?.field ?? 'no policy'}`,
    );
  } catch (err) {
    throw asApiError(err, policy?.field);
  }
}

/**
 * Check the option fields of a create body for a tunnel of `protocol`: their shapes, then the
 * rules they make (and, with `policy`, the rules merged before it) with the policy engine.
 * Returns the options as given (null values left out), or undefined when there are none.
 * @example parseTunnelOptions({ basic_auth: ['ops:correct-horse'] }, 'http', null)
 */
export function parseTunnelOptions(
  fields: Record<string, unknown>,
  protocol: TunnelProtocol,
  policy: PolicyValue | null,
): TunnelOptions | undefined {
  const options = shapeOf(fields, protocol);
  if (options) {
    tunnelTrafficPolicy(
      options,
      protocol,
      policy === null ? undefined : { field: 'policy', value: policy },
    );
  }
  return options;
}

/**
 * Check the options a state file holds for a tunnel of `protocol` as a create request's; throws
 * an {@link AgentApiError} naming the field. Undefined or null is no options.
 * @example checkStoredOptions({ compression: true }, 'http') // { compression: true }
 */
export function checkStoredOptions(
  value: unknown,
  protocol: TunnelProtocol,
): TunnelOptions | undefined {
  if (value === undefined || value === null) return undefined;
  const fields = object('options', value, TUNNEL_OPTION_FIELDS);
  return parseTunnelOptions(fields ?? {}, protocol, null);
}

/**
 * The options without their secrets, as replies show them: passwords of `basic_auth`, the
 * webhook secret and the OAuth/OIDC client secrets become {@link REDACTED}.
 * @example redactOptions({ basic_auth: ['ops:correct-horse'] }) // { basic_auth: ['ops:[redacted]'] }
 */
export function redactOptions(options: TunnelOptions): TunnelOptions {
  const out: TunnelOptions = { ...options };
  if (out.basic_auth) {
    out.basic_auth = out.basic_auth.map((pair) => {
      const colon = pair.indexOf(':');
      return colon < 0 ? REDACTED : `${pair.slice(0, colon)}:${REDACTED}`;
    });
  }
  if (out.webhook_verification) {
    out.webhook_verification = { ...out.webhook_verification, secret: REDACTED };
  }
  if (out.oauth) out.oauth = { ...out.oauth, client_secret: REDACTED };
  if (out.oidc) out.oidc = { ...out.oidc, client_secret: REDACTED };
  return out;
}
