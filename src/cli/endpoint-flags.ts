/**
 * ngrok's endpoint flags for `burrow http|tcp|tls` (`--basic-auth`, `--cidr-allow`,
 * `--request-header-add`, `--oauth`, …) as the traffic policy rules that enforce them, the
 * translation ngrok documents from its agent flags to actions. The rules have the shapes the edge
 * gives the SDKs' bind options (src/edge/binds/bind-option-rules.ts), in the same order, so a flag
 * and the matching SDK option behave the same: who may connect (IP restriction, user agents),
 * the circuit breaker, who is authenticated (webhook signature, basic auth, OpenID Connect or
 * OAuth login), then the request's header changes; on the way back, header changes, then
 * compression. Each rule is named after its flag, so the policy engine's errors name the flag.
 *
 * Flag rules run before the rules of `--policy-file`; {@link endpointTrafficPolicy} merges both
 * into the one document the endpoint is bound with, after checking it with the policy engine.
 */
import { Option, type Command } from 'commander';
import { enclosingCidr, parseCidr } from '../core/cidr.js';
import { quote } from '../core/quote.js';
import {
  parsePolicyDocument,
  POLICY_PHASES_OF_DOCUMENT,
  toPhases,
  validatePolicy,
  type PolicyAction,
  type PolicyPhase,
  type PolicyProtocol,
  type PolicyRule,
} from '../policy/index.js';

export type TunnelProto = 'http' | 'tcp' | 'tls';

/** The endpoint flags as commander parses them (repeatable ones are lists). */
export interface EndpointFlags {
  basicAuth?: string[];
  cidrAllow?: string[];
  cidrDeny?: string[];
  requestHeaderAdd?: string[];
  requestHeaderRemove?: string[];
  responseHeaderAdd?: string[];
  responseHeaderRemove?: string[];
  compression?: boolean;
  hostHeader?: string;
  uaFilterAllow?: string[];
  uaFilterDeny?: string[];
  circuitBreaker?: string;
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

/** The rules the flags add, by phase (each list may be empty). */
export type FlagRules = Record<PolicyPhase, PolicyRule[]>;

/** A flag that cannot be turned into a rule; the message starts with the flag. */
export class EndpointFlagError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(`${flag}: ${message}`);
    this.name = 'EndpointFlagError';
  }
}

const rule = (name: string, actions: PolicyAction[], expressions: string[] = []): PolicyRule => ({
  name,
  expressions,
  actions,
});

/** `${` would be read as an interpolation by add-headers: write it literally. */
const literal = (text: string): string => text.replaceAll('${', () => '$${');

/** A string as a CEL string literal (JSON's escapes are CEL's). */
const celString = (text: string): string => JSON.stringify(text);

/** Values of a repeatable flag that also takes comma-separated lists, as ngrok's do. */
function commaList(values: string[] | undefined): string[] {
  return (values ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

const DENY_403: PolicyAction = { type: 'deny', config: { status_code: 403 } };

/** `--basic-auth user:password` (repeatable) → one basic-auth action with every credential. */
function basicAuth(values: string[] | undefined): PolicyRule | undefined {
  const pairs = values ?? [];
  if (pairs.length === 0) return undefined;
  if (pairs.length > 10) {
    throw new EndpointFlagError('--basic-auth', `at most 10 credentials, not ${pairs.length}`);
  }
  for (const pair of pairs) {
    const colon = pair.indexOf(':');
    if (colon <= 0) {
      throw new EndpointFlagError(
        '--basic-auth',
        'must be "user:password" with a non-empty user (e.g. --basic-auth \'ops:correct-horse\')',
      );
    }
    const password = pair.slice(colon + 1);
    if (password.length < 8 || password.length > 128) {
      throw new EndpointFlagError(
        '--basic-auth',
        `the password of user ${quote(pair.slice(0, colon), '"')} must have 8 to 128 characters, as ngrok requires (it has ${password.length})`,
      );
    }
  }
  return rule('--basic-auth', [{ type: 'basic-auth', config: { credentials: pairs } }]);
}

function cidrs(flag: string, values: string[] | undefined): string[] {
  return commaList(values).map((text) => {
    const parsed = parseCidr(text);
    if (!('problem' in parsed)) return text;
    const why =
      parsed.problem === 'missing-mask'
        ? `is an address, not a CIDR block: write ${text}/${text.includes(':') ? 128 : 32} for this one address`
        : parsed.problem === 'not-network-address'
          ? `is not the first address of its block: did you mean ${enclosingCidr(text) ?? 'the network address'}?`
          : 'is not a CIDR block like 192.0.2.0/24 or 2001:db8::/32';
    throw new EndpointFlagError(flag, `${quote(text, '"')} ${why}`);
  });
}

/** `--cidr-allow` / `--cidr-deny` → one restrict-ips action. */
function ipRestriction(flags: EndpointFlags): PolicyRule | undefined {
  const allow = cidrs('--cidr-allow', flags.cidrAllow);
  const deny = cidrs('--cidr-deny', flags.cidrDeny);
  if (allow.length === 0 && deny.length === 0) return undefined;
  const config: Record<string, unknown> = {};
  if (allow.length > 0) config.allow = allow;
  if (deny.length > 0) config.deny = deny;
  const name = [allow.length > 0 ? '--cidr-allow' : '', deny.length > 0 ? '--cidr-deny' : '']
    .filter((n) => n !== '')
    .join(', ');
  return rule(name, [{ type: 'restrict-ips', config }]);
}

/** `--*-header-remove name` → remove-headers (10 names an action). */
function removeHeaders(flag: string, values: string[] | undefined): PolicyRule | undefined {
  const names = (values ?? []).map((n) => n.trim());
  if (names.length === 0) return undefined;
  const empty = names.find((n) => n === '');
  if (empty !== undefined) throw new EndpointFlagError(flag, 'needs a header name');
  const actions: PolicyAction[] = [];
  for (let i = 0; i < names.length; i += 10) {
    actions.push({ type: 'remove-headers', config: { headers: names.slice(i, i + 10) } });
  }
  return rule(flag, actions);
}

/**
 * `--*-header-add name:value` → add-headers (10 headers an action; a name given again starts a
 * new action, so both values are added, as an SDK's header list would).
 */
function addHeaders(flag: string, values: string[] | undefined): PolicyRule | undefined {
  if (!values || values.length === 0) return undefined;
  const actions: PolicyAction[] = [];
  let current: Record<string, string> = {};
  const flush = (): void => {
    if (Object.keys(current).length > 0)
      actions.push({ type: 'add-headers', config: { headers: current } });
    current = {};
  };
  for (const entry of values) {
    const colon = entry.indexOf(':');
    if (colon <= 0) {
      throw new EndpointFlagError(
        flag,
        `${quote(entry, '"')} is not "name:value" (e.g. ${flag} 'x-env:dev')`,
      );
    }
    const name = entry.slice(0, colon).trim().toLowerCase();
    if (name in current || Object.keys(current).length === 10) flush();
    current[name] = literal(entry.slice(colon + 1).trim());
  }
  flush();
  return rule(flag, actions);
}

/**
 * `--ua-filter-allow` / `--ua-filter-deny` (regexes): a user agent matching an allow pattern
 * passes; otherwise one matching a deny pattern is refused, and with allow patterns but no deny
 * pattern everything else is refused too.
 */
function userAgentFilter(flags: EndpointFlags): PolicyRule | undefined {
  const allow = flags.uaFilterAllow ?? [];
  const deny = flags.uaFilterDeny ?? [];
  const any = (patterns: string[]): string =>
    `getReqHeader('user-agent').exists(ua, ${patterns.map((p) => `ua.matches(${celString(p)})`).join(' || ')})`;
  const expressions: string[] = [];
  if (allow.length > 0) expressions.push(`!${any(allow)}`);
  if (deny.length > 0) expressions.push(any(deny));
  if (expressions.length === 0) return undefined;
  const name = [
    allow.length > 0 ? '--ua-filter-allow' : '',
    deny.length > 0 ? '--ua-filter-deny' : '',
  ]
    .filter((n) => n !== '')
    .join(', ');
  return rule(name, [DENY_403], expressions);
}

/** `--circuit-breaker <ratio>` → circuit-breaker with that error threshold. */
function circuitBreaker(value: string | undefined): PolicyRule | undefined {
  if (value === undefined) return undefined;
  const threshold = value.trim() === '' ? NaN : Number(value);
  if (!(threshold > 0 && threshold <= 1)) {
    throw new EndpointFlagError(
      '--circuit-breaker',
      `the ratio of 5xx responses that opens the breaker must be above 0 and at most 1 (e.g. 0.5), not ${quote(value, '"')}`,
    );
  }
  return rule('--circuit-breaker', [
    { type: 'circuit-breaker', config: { error_threshold: threshold } },
  ]);
}

/** `--verify-webhook <provider> --verify-webhook-secret <secret>` → verify-webhook. */
function webhookVerification(flags: EndpointFlags): PolicyRule | undefined {
  const { verifyWebhook: provider, verifyWebhookSecret: secret } = flags;
  if (provider === undefined) {
    if (secret !== undefined) {
      throw new EndpointFlagError('--verify-webhook-secret', 'needs --verify-webhook <provider>');
    }
    return undefined;
  }
  if (provider.trim() === '') throw new EndpointFlagError('--verify-webhook', 'needs a provider');
  if (secret === undefined || secret === '') {
    throw new EndpointFlagError('--verify-webhook', 'needs --verify-webhook-secret <secret>');
  }
  return rule('--verify-webhook', [{ type: 'verify-webhook', config: { provider, secret } }]);
}

interface LoginFlags {
  /** `oauth` or `oidc`: the flags' prefix and the action result's name. */
  prefix: 'oauth' | 'oidc';
  value: string | undefined;
  clientId: string | undefined;
  clientSecret: string | undefined;
  scopes: string[] | undefined;
  allowEmails: string[] | undefined;
  allowDomains: string[] | undefined;
}

/**
 * `--oauth <provider>` / `--oidc <issuer-url>` and their `-client-id`, `-client-secret`,
 * `-scope`, `-allow-email`, `-allow-domain` → the login action, then (with allow lists) a deny
 * rule for the identities the lists do not name (emails compared in lower case). An identity
 * without an email is refused too.
 */
function login(f: LoginFlags): PolicyRule[] {
  const flag = `--${f.prefix}`;
  const scopes = commaList(f.scopes);
  const emails = commaList(f.allowEmails).map((e) => e.toLowerCase());
  const domains = commaList(f.allowDomains).map((d) => d.toLowerCase().replace(/^@/, ''));
  if (f.value === undefined) {
    const stray = [
      [f.clientId, 'client-id'],
      [f.clientSecret, 'client-secret'],
      [scopes.length > 0 ? scopes : undefined, 'scope'],
      [emails.length > 0 ? emails : undefined, 'allow-email'],
      [domains.length > 0 ? domains : undefined, 'allow-domain'],
    ].find(([v]) => v !== undefined);
    if (stray) {
      throw new EndpointFlagError(
        `${flag}-${String(stray[1])}`,
        `needs ${flag} ${f.prefix === 'oauth' ? '<provider>' : '<issuer-url>'}`,
      );
    }
    return [];
  }
  if (f.value.trim() === '') {
    throw new EndpointFlagError(
      flag,
      f.prefix === 'oauth' ? 'needs a provider' : 'needs an issuer URL',
    );
  }
  if (f.clientId === undefined || f.clientId.trim() === '') {
    throw new EndpointFlagError(
      flag,
      `needs ${flag}-client-id <id> (and ${flag}-client-secret): Burrow runs no managed OAuth app, register one with the provider`,
    );
  }
  if (f.clientSecret === undefined || f.clientSecret === '') {
    throw new EndpointFlagError(
      flag,
      `needs ${flag}-client-secret <secret>: the session cookies are encrypted with a key derived from it`,
    );
  }
  const config: Record<string, unknown> =
    f.prefix === 'oauth' ? { provider: f.value } : { issuer_url: f.value };
  config.client_id = f.clientId;
  config.client_secret = f.clientSecret;
  if (scopes.length > 0) config.scopes = scopes;
  const rules = [rule(flag, [{ type: f.prefix === 'oauth' ? 'oauth' : 'openid-connect', config }])];
  if (emails.length > 0 || domains.length > 0) {
    const email = `actions.ngrok.${f.prefix}.identity.email.lowerAscii()`;
    const tests = [
      ...(emails.length > 0 ? [`${email} in [${emails.map(celString).join(', ')}]`] : []),
      ...domains.map((d) => `${email}.endsWith(${celString(`@${d}`)})`),
    ];
    const name = [
      emails.length > 0 ? `${flag}-allow-email` : '',
      domains.length > 0 ? `${flag}-allow-domain` : '',
    ]
      .filter((n) => n !== '')
      .join(', ');
    rules.push(rule(name, [DENY_403], [`!(${tests.join(' || ')})`]));
  }
  return rules;
}

/**
 * `--host-header` is refused, as the SDKs' HostHeaderRewrite bind option is: the edge sets the
 * Host header itself (a policy's change to it is ignored), and this agent forwards bytes as they
 * come, so nothing would rewrite it.
 */
function hostHeader(value: string | undefined): void {
  if (value === undefined) return;
  throw new EndpointFlagError(
    '--host-header',
    "is not supported: the edge keeps the Host the client sent (as it refuses the SDKs' HostHeaderRewrite option) and this agent forwards requests unchanged; make your local service accept that host (X-Forwarded-Host carries it too)",
  );
}

/**
 * The rules that enforce `flags` on an endpoint of `proto`, by phase, in the order of
 * bind-option-rules.ts. Throws {@link EndpointFlagError} naming the flag for a malformed value;
 * the policy engine checks the rest (header names, regexes) in {@link endpointTrafficPolicy}.
 * @example flagRules({ cidrDeny: ['10.0.0.0/8'] }, 'tcp').on_tcp_connect
 *   // [{ name: '--cidr-deny', expressions: [], actions: [{ type: 'restrict-ips', config: { deny: ['10.0.0.0/8'] } }] }]
 */
export function flagRules(flags: EndpointFlags, proto: TunnelProto): FlagRules {
  const out: FlagRules = { on_tcp_connect: [], on_http_request: [], on_http_response: [] };
  const restrict = ipRestriction(flags);
  if (proto !== 'http') {
    if (restrict) out.on_tcp_connect.push(restrict);
    return out;
  }
  hostHeader(flags.hostHeader);
  const request: Array<PolicyRule | undefined> = [
    restrict,
    userAgentFilter(flags),
    circuitBreaker(flags.circuitBreaker),
    webhookVerification(flags),
    basicAuth(flags.basicAuth),
    ...login({
      prefix: 'oidc',
      value: flags.oidc,
      clientId: flags.oidcClientId,
      clientSecret: flags.oidcClientSecret,
      scopes: flags.oidcScope,
      allowEmails: flags.oidcAllowEmail,
      allowDomains: flags.oidcAllowDomain,
    }),
    ...login({
      prefix: 'oauth',
      value: flags.oauth,
      clientId: flags.oauthClientId,
      clientSecret: flags.oauthClientSecret,
      scopes: flags.oauthScope,
      allowEmails: flags.oauthAllowEmail,
      allowDomains: flags.oauthAllowDomain,
    }),
    removeHeaders('--request-header-remove', flags.requestHeaderRemove),
    addHeaders('--request-header-add', flags.requestHeaderAdd),
  ];
  for (const r of request) if (r) out.on_http_request.push(r);
  const response = [
    removeHeaders('--response-header-remove', flags.responseHeaderRemove),
    addHeaders('--response-header-add', flags.responseHeaderAdd),
    flags.compression
      ? rule('--compression', [{ type: 'compress-response', config: null }])
      : undefined,
  ];
  for (const r of response) if (r) out.on_http_response.push(r);
  return out;
}

/** The policy protocol an endpoint of `proto` is checked for. */
export function policyProtocol(proto: TunnelProto): PolicyProtocol {
  return proto === 'http' ? 'https' : proto;
}

/**
 * The flags' rules followed by the rules of policy `text` (either form), as one document in the
 * phase form; phases without rules are left out.
 * @example mergePolicy(flagRules({ cidrDeny: ['10.0.0.0/8'] }, 'http'), 'on_http_request: [{actions: [{type: deny}]}]', 'https', '--policy-file p.yml')
 *   // { on_http_request: [{ name: '--cidr-deny', … }, { expressions: [], actions: [{ type: 'deny', config: null }] }] }
 */
export function mergePolicy(
  rules: FlagRules,
  text: string | undefined,
  protocol: PolicyProtocol,
  field: string,
): Partial<FlagRules> {
  const own = text === undefined ? undefined : toPhases(parsePolicyDocument(text, field), protocol);
  const doc: Partial<FlagRules> = {};
  for (const phase of POLICY_PHASES_OF_DOCUMENT) {
    const mine = (own?.[phase] ?? []).map(({ name, expressions, actions }) => ({
      ...(name === undefined ? {} : { name }),
      expressions,
      actions,
    }));
    const all = [...rules[phase], ...mine];
    if (all.length > 0) doc[phase] = all;
  }
  return doc;
}

/** Re-throw a policy engine error about a flag's rule as one that starts with the flag. */
function checkRule(phase: PolicyPhase, r: PolicyRule, protocol: PolicyProtocol): void {
  const flag = r.name ?? 'flags';
  try {
    validatePolicy(JSON.stringify({ [phase]: [r] }), protocol, flag);
  } catch (err) {
    const message = (err as Error).message;
    throw new EndpointFlagError(
      flag,
      message.startsWith(`${flag}: `) ? message.slice(flag.length + 2) : message,
    );
  }
}

/**
 * The traffic policy text to bind an endpoint of `proto` with: the policy file's text unchanged
 * when no flag adds a rule, else one JSON document with the flags' rules first, then the file's.
 * Each flag's rule, the file and the whole are checked with the policy engine first, so a bad
 * flag fails before anything connects, with a message that starts with the flag.
 * @example endpointTrafficPolicy({ basicAuth: ['ops:correct-horse'] }, 'http', undefined)
 *   // '{"on_http_request":[{"name":"--basic-auth","expressions":[],"actions":[{"type":"basic-auth","config":{"credentials":["ops:correct-horse"]}}]}]}'
 */
export function endpointTrafficPolicy(
  flags: EndpointFlags,
  proto: TunnelProto,
  file: { path: string; text: string } | undefined,
): string | undefined {
  const rules = flagRules(flags, proto);
  const count = POLICY_PHASES_OF_DOCUMENT.reduce((n, phase) => n + rules[phase].length, 0);
  if (count === 0) return file?.text;
  const protocol = policyProtocol(proto);
  for (const phase of POLICY_PHASES_OF_DOCUMENT) {
    for (const r of rules[phase]) checkRule(phase, r, protocol);
  }
  const fileField = `--policy-file ${file?.path ?? ''}`.trim();
  if (file) validatePolicy(file.text, protocol, fileField);
  const merged = JSON.stringify(mergePolicy(rules, file?.text, protocol, fileField));
  validatePolicy(merged, protocol, 'the endpoint flags with --policy-file');
  return merged;
}

const collect = (value: string, previous: string[] | undefined): string[] => [
  ...(previous ?? []),
  value,
];

/**
 * Add the endpoint flags of `proto` to a `burrow http|tcp|tls` command: `--cidr-allow` and
 * `--cidr-deny` on all three, the others on http.
 * @example addEndpointFlags(program.command('http'), 'http');
 */
export function addEndpointFlags(cmd: Command, proto: TunnelProto): Command {
  const list = (flags: string, description: string): void => {
    cmd.addOption(new Option(flags, `${description} (repeatable)`).argParser(collect));
  };
  list('--cidr-allow <cidr>', 'accept only clients in this CIDR block → restrict-ips allow');
  list('--cidr-deny <cidr>', 'refuse clients in this CIDR block → restrict-ips deny');
  if (proto !== 'http') return cmd;
  list('--basic-auth <user:password>', 'require HTTP Basic credentials → basic-auth');
  list('--request-header-add <name:value>', 'add a header to requests → add-headers');
  list('--request-header-remove <name>', 'remove a header from requests → remove-headers');
  list('--response-header-add <name:value>', 'add a header to responses → add-headers');
  list('--response-header-remove <name>', 'remove a header from responses → remove-headers');
  cmd.option('--compression', 'compress responses (gzip, br, deflate) → compress-response');
  cmd.option('--host-header <rewrite|value>', 'not supported by Burrow (the edge keeps the Host)');
  list('--ua-filter-allow <regex>', 'accept only these user agents → deny');
  list('--ua-filter-deny <regex>', 'refuse these user agents → deny');
  cmd.option(
    '--circuit-breaker <ratio>',
    'answer 503 while the share of 5xx responses is above this ratio → circuit-breaker',
  );
  cmd.option('--oauth <provider>', 'require an OAuth login with this provider → oauth');
  cmd.option('--oauth-client-id <id>', 'the OAuth app id registered with the provider');
  cmd.option('--oauth-client-secret <secret>', 'the OAuth app secret');
  list('--oauth-scope <scope>', 'an OAuth scope to request');
  list('--oauth-allow-email <email>', 'let only this email in after an OAuth login → deny');
  list('--oauth-allow-domain <domain>', 'let only emails of this domain in → deny');
  cmd.option('--oidc <issuer-url>', 'require an OpenID Connect login → openid-connect');
  cmd.option('--oidc-client-id <id>', 'the OpenID Connect client id');
  cmd.option('--oidc-client-secret <secret>', 'the OpenID Connect client secret');
  list('--oidc-scope <scope>', 'an OpenID Connect scope to request');
  list('--oidc-allow-email <email>', 'let only this email in after an OIDC login → deny');
  list('--oidc-allow-domain <domain>', 'let only emails of this domain in → deny');
  cmd.option('--verify-webhook <provider>', 'check webhook signatures → verify-webhook');
  cmd.option('--verify-webhook-secret <secret>', 'the webhook signing secret');
  return cmd;
}
