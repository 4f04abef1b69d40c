/**
 * ngrok's endpoint options (basic auth, IP restriction, header changes, OAuth and OpenID Connect
 * login, …) as the traffic policy rules that enforce them, the translation ngrok documents from
 * its agent options to actions. Two front ends share it: the `burrow http|tcp|tls` flags
 * (src/cli/endpoint-flags.ts: `--basic-auth`, `--cidr-allow`, …) and the device agent's tunnel
 * fields (src/agent/tunnel-options.ts: `basic_auth`, `ip_restriction`, …). Each says how its
 * options are named through an {@link OptionNaming}, so rules and errors name the flag or field
 * the user wrote.
 *
 * The edge's translation of the SDKs' bind options (src/edge/binds/bind-option-rules.ts) builds
 * its rules with the same builders (option-rule-builders.ts: basicAuthRule, restrictIpsRule, …),
 * in the same order, so an option behaves the same whichever way it was given: who may connect (IP restriction, user agents), the circuit breaker,
 * who is authenticated (webhook signature, basic auth, OpenID Connect or OAuth login), then the
 * request's header changes; on the way back, header changes, then compression.
 *
 * Option rules run before the endpoint's own policy; trafficPolicyWithRules (option-rules-merge.ts)
 * merges both into the one document the endpoint is bound with, after checking it with the
 * policy engine.
 */
import { enclosingCidr, parseCidr } from '../core/cidr.js';
import { CODES, ValidationError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import type { PolicyPhase, PolicyRule } from './parse.js';
import {
  addHeadersActions,
  basicAuthRule,
  circuitBreakerRule,
  compressionRule,
  headerPair,
  loginRules,
  lowerValues,
  removeHeadersActions,
  restrictIpsRule,
  rule,
  userAgentRule,
  values,
  webhookRule,
} from './option-rule-builders.js';

export type EndpointProto = 'http' | 'tcp' | 'tls';

/**
 * The options, each list already split into its values (the CLI splits comma-separated flags
 * before). Only `cidrAllow`/`cidrDeny` apply to tcp and tls endpoints.
 */
export interface EndpointOptions {
  basicAuth?: string[];
  cidrAllow?: string[];
  cidrDeny?: string[];
  requestHeaderAdd?: string[];
  requestHeaderRemove?: string[];
  responseHeaderAdd?: string[];
  responseHeaderRemove?: string[];
  compression?: boolean;
  uaFilterAllow?: string[];
  uaFilterDeny?: string[];
  /** The ratio of 5xx responses that opens the breaker, in (0, 1]; text as a flag gives it. */
  circuitBreaker?: string | number;
  oauth?: string;
  oauthClientId?: string;
  oauthClientSecret?: string;
  oauthScope?: string[];
  oauthAllowEmail?: string[];
  oauthAllowDomain?: string[];
  oidc?: string;
  oidcClientId?: string;
  oidcClientSecret?: string;
  oidcScope?: string[];
  oidcAllowEmail?: string[];
  oidcAllowDomain?: string[];
  verifyWebhook?: string;
  verifyWebhookSecret?: string;
}

export type EndpointOptionKey = keyof EndpointOptions;

/** How a front end names its options in rule names and error messages. */
export interface OptionNaming {
  /**
   * The option as the user wrote it (`--basic-auth`, `basic_auth`); with `index`, the list
   * element it gave at that place (`basic_auth[0]`) when the front end can point at one.
   */
  name(key: EndpointOptionKey, index?: number): string;
  /** How the user writes `value` for the option, for examples (`--basic-auth 'ops:pw'`). */
  example(key: EndpointOptionKey, value: string): string;
}

/** The rules the options add, by phase (each list may be empty). */
export type OptionRules = Record<PolicyPhase, PolicyRule[]>;

/**
 * An option that cannot be turned into a rule: a 400 whose message starts with the option's name
 * (its `field`). Its code is `ERR_NGROK_215` (a value breaks a rule), or the policy engine's
 * (ERR_NGROK_22xx) when the engine refused the option's rule; that refusal is the `cause`.
 * @example throw new EndpointOptionError('--basic-auth', 'at most 10 credentials, not 11');
 */
export class EndpointOptionError extends ValidationError {
  declare readonly code: string;
  declare readonly field: string;

  constructor(
    option: string,
    message: string,
    code: string = CODES.invalidValue,
    options?: { cause?: unknown },
  ) {
    super(code, option, `${option}: ${message}`, { sentence: true, ...options });
  }
}

/** The names of the options a rule enforces, joined: the rule's name. */
const joinNames = (n: OptionNaming, keys: Array<EndpointOptionKey | false>): string =>
  keys
    .filter((k): k is EndpointOptionKey => k !== false)
    .map((k) => n.name(k))
    .join(', ');

/** basic auth (`user:password` each) → one basic-auth action with every credential. */
function basicAuth(n: OptionNaming, pairs: string[] | undefined): PolicyRule | undefined {
  if (!pairs || pairs.length === 0) return undefined;
  if (pairs.length > 10) {
    throw new EndpointOptionError(
      n.name('basicAuth'),
      `at most 10 credentials, not ${pairs.length}`,
    );
  }
  pairs.forEach((pair, i) => {
    const colon = pair.indexOf(':');
    if (colon <= 0) {
      throw new EndpointOptionError(
        n.name('basicAuth', i),
        `must be "user:password" with a non-empty user (e.g. ${n.example('basicAuth', 'ops:correct-horse')})`,
      );
    }
    const password = pair.slice(colon + 1);
    if (password.length < 8 || password.length > 128) {
      throw new EndpointOptionError(
        n.name('basicAuth', i),
        `the password of user ${quote(pair.slice(0, colon), '"')} must have 8 to 128 characters, as ngrok requires (it has ${password.length})`,
      );
    }
  });
  return basicAuthRule(n.name('basicAuth'), pairs);
}

function cidrs(n: OptionNaming, key: EndpointOptionKey, list: string[] | undefined): string[] {
  return (list ?? []).map((raw, i) => {
    const text = raw.trim();
    const parsed = parseCidr(text);
    if (!('problem' in parsed)) return text;
    const why =
      parsed.problem === 'missing-mask'
        ? `is an address, not a CIDR block: write ${text}/${text.includes(':') ? 128 : 32} for this one address`
        : parsed.problem === 'not-network-address'
          ? `is not the first address of its block: did you mean ${enclosingCidr(text) ?? 'the network address'}?`
          : 'is not a CIDR block like 192.0.2.0/24 or 2001:db8::/32';
    throw new EndpointOptionError(n.name(key, i), `${quote(text, '"')} ${why}`);
  });
}

/** CIDR allow / deny lists → one restrict-ips action. */
function ipRestriction(n: OptionNaming, o: EndpointOptions): PolicyRule | undefined {
  const allow = cidrs(n, 'cidrAllow', o.cidrAllow);
  const deny = cidrs(n, 'cidrDeny', o.cidrDeny);
  const name = joinNames(n, [allow.length > 0 && 'cidrAllow', deny.length > 0 && 'cidrDeny']);
  return restrictIpsRule(name, allow, deny);
}

/** header names to remove → remove-headers (10 names an action). */
function removeHeaders(
  n: OptionNaming,
  key: EndpointOptionKey,
  list: string[] | undefined,
): PolicyRule | undefined {
  const names = (list ?? []).map((name) => name.trim());
  if (names.length === 0) return undefined;
  const empty = names.findIndex((name) => name === '');
  if (empty >= 0) throw new EndpointOptionError(n.name(key, empty), 'needs a header name');
  return rule(n.name(key), removeHeadersActions(names));
}

/**
 * headers to add (`name:value` each) → add-headers (10 headers an action; a name given again
 * starts a new action, so both values are added, as an SDK's header list would).
 */
function addHeaders(
  n: OptionNaming,
  key: EndpointOptionKey,
  list: string[] | undefined,
): PolicyRule | undefined {
  if (!list || list.length === 0) return undefined;
  const pairs = list.map((entry, i) => {
    const pair = headerPair(entry);
    if (pair) return pair;
    throw new EndpointOptionError(
      n.name(key, i),
      `${quote(entry, '"')} is not "name:value" (e.g. ${n.example(key, 'x-env:dev')})`,
    );
  });
  return rule(n.name(key), addHeadersActions(pairs));
}

/**
 * user agent allow / deny regexes: a user agent matching an allow pattern passes; otherwise one
 * matching a deny pattern is refused, and with allow patterns but no deny pattern everything else
 * is refused too.
 */
function userAgentFilter(n: OptionNaming, o: EndpointOptions): PolicyRule | undefined {
  const allow = o.uaFilterAllow ?? [];
  const deny = o.uaFilterDeny ?? [];
  const name = joinNames(n, [
    allow.length > 0 && 'uaFilterAllow',
    deny.length > 0 && 'uaFilterDeny',
  ]);
  return userAgentRule(name, allow, deny);
}

/** the circuit breaker's ratio → circuit-breaker with that error threshold. */
function circuitBreaker(
  n: OptionNaming,
  value: string | number | undefined,
): PolicyRule | undefined {
  if (value === undefined) return undefined;
  const threshold = typeof value === 'number' ? value : value.trim() === '' ? NaN : Number(value);
  if (!(threshold > 0 && threshold <= 1)) {
    throw new EndpointOptionError(
      n.name('circuitBreaker'),
      `the ratio of 5xx responses that opens the breaker must be above 0 and at most 1 (e.g. 0.5), not ${quote(String(value), '"')}`,
    );
  }
  return circuitBreakerRule(n.name('circuitBreaker'), threshold);
}

/** webhook provider and secret → verify-webhook. */
function webhookVerification(n: OptionNaming, o: EndpointOptions): PolicyRule | undefined {
  const { verifyWebhook: provider, verifyWebhookSecret: secret } = o;
  if (provider === undefined) {
    if (secret !== undefined) {
      throw new EndpointOptionError(
        n.name('verifyWebhookSecret'),
        `needs ${n.name('verifyWebhook')} <provider>`,
      );
    }
    return undefined;
  }
  if (provider.trim() === '') {
    throw new EndpointOptionError(
      n.name('verifyWebhook'),
      'needs a provider, like github or stripe',
    );
  }
  if (secret === undefined || secret === '') {
    throw new EndpointOptionError(
      n.name('verifyWebhook'),
      `needs ${n.name('verifyWebhookSecret')} <secret>`,
    );
  }
  return webhookRule(n.name('verifyWebhook'), provider, secret);
}

const LOGIN_KEYS = {
  oauth: {
    value: 'oauth',
    clientId: 'oauthClientId',
    clientSecret: 'oauthClientSecret',
    scopes: 'oauthScope',
    allowEmails: 'oauthAllowEmail',
    allowDomains: 'oauthAllowDomain',
  },
  oidc: {
    value: 'oidc',
    clientId: 'oidcClientId',
    clientSecret: 'oidcClientSecret',
    scopes: 'oidcScope',
    allowEmails: 'oidcAllowEmail',
    allowDomains: 'oidcAllowDomain',
  },
} as const satisfies Record<string, Record<string, EndpointOptionKey>>;

/**
 * An OAuth provider / OpenID Connect issuer with its client id, client secret, scopes and allowed
 * emails and domains → the login action, then (with allow lists) a deny rule for the identities
 * the lists do not name (emails compared in lower case). An identity without an email is refused
 * too.
 */
function login(n: OptionNaming, o: EndpointOptions, kind: 'oauth' | 'oidc'): PolicyRule[] {
  const keys = LOGIN_KEYS[kind];
  const value = o[keys.value];
  const clientId = o[keys.clientId];
  const clientSecret = o[keys.clientSecret];
  const scopes = values(o[keys.scopes]);
  const emails = lowerValues(o[keys.allowEmails]);
  const domains = lowerValues(o[keys.allowDomains]).map((d) => d.replace(/^@/, ''));
  const what = kind === 'oauth' ? '<provider>' : '<issuer-url>';
  if (value === undefined) {
    const stray = (
      [
        [clientId, keys.clientId],
        [clientSecret, keys.clientSecret],
        [scopes.length > 0 ? scopes : undefined, keys.scopes],
        [emails.length > 0 ? emails : undefined, keys.allowEmails],
        [domains.length > 0 ? domains : undefined, keys.allowDomains],
      ] as const
    ).find(([v]) => v !== undefined);
    if (stray) {
      throw new EndpointOptionError(n.name(stray[1]), `needs ${n.name(keys.value)} ${what}`);
    }
    return [];
  }
  const name = n.name(keys.value);
  if (value.trim() === '') {
    throw new EndpointOptionError(
      name,
      kind === 'oauth'
        ? 'needs a provider, like google or github'
        : 'needs an issuer URL, like https://accounts.example.com',
    );
  }
  if (clientId === undefined || clientId.trim() === '') {
    throw new EndpointOptionError(
      name,
      `needs ${n.name(keys.clientId)} <id> (and ${n.name(keys.clientSecret)}): Burrow runs no managed OAuth app, register one with the provider`,
    );
  }
  if (clientSecret === undefined || clientSecret === '') {
    throw new EndpointOptionError(
      name,
      `needs ${n.name(keys.clientSecret)} <secret>: the session cookies are encrypted with a key derived from it`,
    );
  }
  const config: Record<string, unknown> =
    kind === 'oauth' ? { provider: value } : { issuer_url: value };
  config.client_id = clientId;
  config.client_secret = clientSecret;
  if (scopes.length > 0) config.scopes = scopes;
  const denyName = joinNames(n, [
    emails.length > 0 && keys.allowEmails,
    domains.length > 0 && keys.allowDomains,
  ]);
  return loginRules(kind, name, config, { emails, domains, denyName });
}

/**
 * The rules that enforce `options` on an endpoint of `proto`, by phase, in the order of
 * bind-option-rules.ts, each named with `naming`. Throws {@link EndpointOptionError} naming the
 * option for a malformed value; the policy engine checks the rest (header names, regexes) in
 * trafficPolicyWithRules (option-rules-merge.ts).
 * @example optionRules({ cidrDeny: ['10.0.0.0/8'] }, 'tcp', naming).on_tcp_connect
 *   // [{ name: '--cidr-deny', expressions: [], actions: [{ type: 'restrict-ips', config: { deny: ['10.0.0.0/8'] } }] }]
 */
export function optionRules(
  options: EndpointOptions,
  proto: EndpointProto,
  naming: OptionNaming,
): OptionRules {
  const n = naming;
  const out: OptionRules = { on_tcp_connect: [], on_http_request: [], on_http_response: [] };
  const restrict = ipRestriction(n, options);
  if (proto !== 'http') {
    if (restrict) out.on_tcp_connect.push(restrict);
    return out;
  }
  const request: Array<PolicyRule | undefined> = [
    restrict,
    userAgentFilter(n, options),
    circuitBreaker(n, options.circuitBreaker),
    webhookVerification(n, options),
    basicAuth(n, options.basicAuth),
    ...login(n, options, 'oidc'),
    ...login(n, options, 'oauth'),
    removeHeaders(n, 'requestHeaderRemove', options.requestHeaderRemove),
    addHeaders(n, 'requestHeaderAdd', options.requestHeaderAdd),
  ];
  for (const r of request) if (r) out.on_http_request.push(r);
  const response = [
    removeHeaders(n, 'responseHeaderRemove', options.responseHeaderRemove),
    addHeaders(n, 'responseHeaderAdd', options.responseHeaderAdd),
    options.compression ? compressionRule(n.name('compression')) : undefined,
  ];
  for (const r of response) if (r) out.on_http_response.push(r);
  return out;
}
