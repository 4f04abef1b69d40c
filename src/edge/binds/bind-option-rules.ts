/**
 * The bind options of the agent SDKs (`BasicAuth`, `IPRestriction`, `RequestHeaders`, …) as the
 * traffic policy rules that enforce them, the translation ngrok documents from its modules to
 * actions. The rules run before the endpoint's own traffic policy, in the order below: who may
 * connect (IP restriction, user agents), then the circuit breaker, then who is authenticated
 * (webhook signature, basic auth, OIDC or OAuth login), then the request's changes; on the way back, header changes,
 * then compression. On tls endpoints, TLS termination and mutual TLS (terminate-tls) come right
 * after the IP restriction, so refused addresses cost no handshake.
 */
import type { PolicyAction, PolicyProtocol, PolicyRule } from '../../policy/index.js';
import type { BindExtra, BindOpts } from '../../protocol/index.js';
import { refusals } from './agent-errors.js';
import { isSet } from './bind-options.js';

/** The rules an endpoint's options add, by phase. */
export interface OptionRules {
  on_tcp_connect: PolicyRule[];
  on_http_request: PolicyRule[];
  on_http_response: PolicyRule[];
}

type Mapping = Record<string, unknown>;
const isMapping = (v: unknown): v is Mapping =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const bad = refusals.badOption;

/**
 * A field of an option object by its wire name (`allow_cidrs`), also found under other spellings
 * SDKs use (`AllowCIDRs`, `allowCidrs`): case and underscores are ignored.
 */
function field(value: Mapping, name: string): unknown {
  if (name in value) return value[name];
  const want = name.replaceAll('_', '').toLowerCase();
  const key = Object.keys(value).find((k) => k.replaceAll('_', '').toLowerCase() === want);
  return key === undefined ? undefined : value[key];
}

function strings(option: string, value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    throw bad(option, 'it must be a list of strings');
  }
  return value as string[];
}

const rule = (name: string, actions: PolicyAction[], expressions: string[] = []): PolicyRule => ({
  name,
  expressions,
  actions,
});

/** `${` would be read as an interpolation by add-headers: write it literally. */
const literal = (text: string): string => text.replaceAll('${', () => '$${');

/** BasicAuth `{credentials: [{username, cleartext_password}]}`, or the older `Auth: "user:pass"`. */
function basicAuth(opts: BindOpts): PolicyRule | undefined {
  const pairs: string[] = [];
  if (isSet(opts.Auth)) {
    if (typeof opts.Auth !== 'string' || !opts.Auth.includes(':')) {
      throw bad('Opts.Auth', 'it must be "user:password"');
    }
    pairs.push(opts.Auth);
  }
  if (isSet(opts.BasicAuth)) {
    const value = opts.BasicAuth;
    const list = isMapping(value) ? field(value, 'credentials') : undefined;
    if (!Array.isArray(list)) throw bad('Opts.BasicAuth', 'it has no credentials list');
    for (const c of list) {
      const user = isMapping(c) ? field(c, 'username') : undefined;
      const password = isMapping(c) ? field(c, 'cleartext_password') : undefined;
      if (isMapping(c) && isSet(field(c, 'hashed_password'))) {
        throw bad('Opts.BasicAuth', 'hashed passwords are not supported; send the password');
      }
      if (typeof user !== 'string' || typeof password !== 'string') {
        throw bad('Opts.BasicAuth', 'each credential needs a username and a password');
      }
      pairs.push(`${user}:${password}`);
    }
  }
  if (pairs.length === 0) return undefined;
  return rule('Opts.BasicAuth', [{ type: 'basic-auth', config: { credentials: pairs } }]);
}

function ipRestriction(opts: BindOpts, extra: BindExtra | undefined): PolicyAction | undefined {
  const value = opts.IPRestriction;
  const allow = isMapping(value) ? strings('Opts.IPRestriction', field(value, 'allow_cidrs')) : [];
  const deny = isMapping(value) ? strings('Opts.IPRestriction', field(value, 'deny_cidrs')) : [];
  if (isSet(value) && !isMapping(value)) throw bad('Opts.IPRestriction', 'it must be an object');
  const policies = isSet(extra?.IPPolicyRef)
    ? String(extra!.IPPolicyRef)
        .split(',')
        .map((id) => id.trim())
        .filter((id) => id !== '')
    : [];
  if (allow.length === 0 && deny.length === 0 && policies.length === 0) return undefined;
  const config: Mapping = {};
  if (allow.length > 0) config.allow = allow;
  if (deny.length > 0) config.deny = deny;
  if (policies.length > 0) config.ip_policies = policies;
  return { type: 'restrict-ips', config };
}

/** `{add: ["name:value"], remove: ["name"]}` as remove-headers, then add-headers (10 at a time). */
function headers(option: string, value: unknown): PolicyAction[] {
  if (!isSet(value)) return [];
  if (!isMapping(value)) throw bad(option, 'it must be an object');
  const actions: PolicyAction[] = [];
  const remove = strings(option, field(value, 'remove'));
  for (let i = 0; i < remove.length; i += 10) {
    actions.push({ type: 'remove-headers', config: { headers: remove.slice(i, i + 10) } });
  }
  const add: Array<[string, string]> = [];
  for (const entry of strings(option, field(value, 'add'))) {
    const colon = entry.indexOf(':');
    if (colon <= 0) throw bad(option, `${JSON.stringify(entry)} is not "name:value"`);
    add.push([entry.slice(0, colon).trim().toLowerCase(), literal(entry.slice(colon + 1).trim())]);
  }
  const parsed = field(value, 'add_parsed') ?? value.addParsed;
  if (isMapping(parsed)) {
    for (const [name, v] of Object.entries(parsed)) {
      if (typeof v === 'string') add.push([name.toLowerCase(), literal(v)]);
    }
  }
  for (let i = 0; i < add.length; i += 10) {
    actions.push({
      type: 'add-headers',
      config: { headers: Object.fromEntries(add.slice(i, i + 10)) },
    });
  }
  return actions;
}

/** A regex as a CEL string literal (JSON's escapes are CEL's). */
const celString = (text: string): string => JSON.stringify(text);

/**
 * UserAgentFilter `{allow: [re], deny: [re]}`: a user agent matching an allow pattern passes;
 * otherwise one matching a deny pattern is refused, and with allow patterns but no deny pattern
 * everything else is refused too (the allow list is then the whole rule).
 */
function userAgentFilter(opts: BindOpts): PolicyRule | undefined {
  const value = opts.UserAgentFilter;
  if (!isSet(value)) return undefined;
  if (!isMapping(value)) throw bad('Opts.UserAgentFilter', 'it must be an object');
  const allow = strings('Opts.UserAgentFilter', field(value, 'allow'));
  const deny = strings('Opts.UserAgentFilter', field(value, 'deny'));
  const any = (patterns: string[]): string =>
    `getReqHeader('user-agent').exists(ua, ${patterns.map((p) => `ua.matches(${celString(p)})`).join(' || ')})`;
  const expressions: string[] = [];
  if (allow.length > 0) expressions.push(`!${any(allow)}`);
  if (deny.length > 0) expressions.push(any(deny));
  if (expressions.length === 0) return undefined;
  return rule(
    'Opts.UserAgentFilter',
    [{ type: 'deny', config: { status_code: 403 } }],
    expressions,
  );
}

function circuitBreaker(opts: BindOpts): PolicyRule | undefined {
  const value = opts.CircuitBreaker;
  if (!isSet(value)) return undefined;
  const threshold = isMapping(value) ? field(value, 'error_threshold') : undefined;
  if (typeof threshold !== 'number' || !(threshold > 0 && threshold <= 1)) {
    throw bad('Opts.CircuitBreaker', 'error_threshold must be a share above 0 and at most 1');
  }
  return rule('Opts.CircuitBreaker', [
    { type: 'circuit-breaker', config: { error_threshold: threshold } },
  ]);
}

function webhookVerification(opts: BindOpts): PolicyRule | undefined {
  const value = opts.WebhookVerification;
  if (!isSet(value)) return undefined;
  if (!isMapping(value)) throw bad('Opts.WebhookVerification', 'it must be an object');
  if (isSet(field(value, 'sealed_secret'))) {
    throw bad('Opts.WebhookVerification', 'sealed secrets are not supported; send the secret');
  }
  const provider = field(value, 'provider');
  const secret = field(value, 'secret');
  if (typeof provider !== 'string' || typeof secret !== 'string' || secret === '') {
    throw bad('Opts.WebhookVerification', 'it needs a provider and a secret');
  }
  return rule('Opts.WebhookVerification', [
    { type: 'verify-webhook', config: { provider, secret } },
  ]);
}

/** A list of strings in option `option` (field `name`), lowercased and trimmed, empties dropped. */
const lowered = (option: string, value: Mapping, name: string): string[] =>
  strings(option, field(value, name))
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');

/**
 * OIDC `{issuer_url, client_id, client_secret, scopes, allow_emails, allow_domains}` and OAuth
 * `{provider, client_id, client_secret, scopes, allow_emails, allow_domains}`: the login action
 * (openid-connect or oauth), then, when allow lists are given, a deny (403) for every identity
 * whose email is neither listed nor at a listed domain. The action checks the rest (required
 * fields, provider names) when the policy compiles, naming the config key.
 */
function login(opts: BindOpts, option: 'OIDC' | 'OAuth'): PolicyRule[] {
  const value = opts[option];
  if (!isSet(value)) return [];
  const name = `Opts.${option}`;
  if (!isMapping(value)) throw bad(name, 'it must be an object');
  if (isSet(field(value, 'sealed_client_secret'))) {
    throw bad(name, 'sealed client secrets are not supported; send the client secret');
  }
  const config: Mapping = {};
  const keys =
    option === 'OIDC'
      ? ['issuer_url', 'client_id', 'client_secret']
      : ['provider', 'client_id', 'client_secret'];
  for (const key of keys) {
    const v = field(value, key);
    if (v !== undefined && v !== null && v !== '') {
      if (typeof v !== 'string') throw bad(name, `${key} must be a string`);
      config[key] = v;
    }
  }
  const scopes = strings(name, field(value, 'scopes')).filter((s) => s.trim() !== '');
  if (scopes.length > 0) config.scopes = scopes;
  const type = option === 'OIDC' ? 'openid-connect' : 'oauth';
  const rules = [rule(name, [{ type, config }])];
  const emails = lowered(name, value, 'allow_emails');
  const domains = lowered(name, value, 'allow_domains').map((d) => d.replace(/^@/, ''));
  if (emails.length + domains.length > 0) {
    const email = `actions.ngrok.${option === 'OIDC' ? 'oidc' : 'oauth'}.identity.email.lowerAscii()`;
    const allowed = [
      ...(emails.length > 0 ? [`${email} in [${emails.map(celString).join(', ')}]`] : []),
      ...domains.map((d) => `${email}.endsWith(${celString(`@${d}`)})`),
    ];
    rules.push(
      rule(
        `${name} allow list`,
        [{ type: 'deny', config: { status_code: 403 } }],
        [`!(${allowed.join(' || ')})`],
      ),
    );
  }
  return rules;
}

/**
 * PEM bytes as SDKs send them: base64 (Go `[]byte`, Rust `Vec<u8>`), or PEM text as is.
 * @example pemText('Opts.TLSTermination', 'cert', 'LS0tLS1CRUdJTi...') // '-----BEGIN...'
 */
function pemText(option: string, name: string, value: unknown): string {
  if (Array.isArray(value) && value.every((b) => Number.isInteger(b) && b >= 0 && b < 256)) {
    return Buffer.from(value as number[]).toString('utf8');
  }
  if (typeof value !== 'string') throw bad(option, `${name} must be PEM bytes (base64)`);
  if (value.includes('-----BEGIN')) return value;
  const compact = value.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
    throw bad(option, `${name} must be PEM bytes (base64)`);
  }
  const text = Buffer.from(compact, 'base64').toString('utf8');
  if (!text.includes('-----BEGIN')) throw bad(option, `${name} is not PEM once decoded`);
  return text;
}

const present = (value: unknown): boolean => value !== null && value !== undefined;

/**
 * TLSTermination `{cert, key}` (ngrok-go `WithTLSTermination`, @ngrok/ngrok `.termination(cert,
 * key)`; an object without a key pair terminates with the edge's certificate) and
 * MutualTLSAtEdge / MutualTLSCA `{mutual_tls_ca}` (the CA PEMs, `.mutualTlsca(pem)`), as one
 * terminate-tls action: mutual TLS needs the TLS to end at the edge. TLS endpoints only.
 */
function tlsTermination(opts: BindOpts): PolicyRule | undefined {
  const config: Mapping = {};
  const names: string[] = [];
  const termination = opts.TLSTermination;
  if (present(termination)) {
    const option = 'Opts.TLSTermination';
    if (!isMapping(termination)) throw bad(option, 'it must be an object');
    if (isSet(field(termination, 'sealed_key'))) {
      throw bad(option, 'sealed keys are not supported; send the key');
    }
    const cert = field(termination, 'cert');
    const key = field(termination, 'key');
    if (isSet(cert) !== isSet(key)) throw bad(option, 'it needs both cert and key, or neither');
    if (isSet(cert)) {
      config.server_certificate = pemText(option, 'cert', cert);
      config.server_private_key = pemText(option, 'key', key);
    }
    names.push(option);
  }
  const cas: string[] = [];
  for (const name of ['MutualTLSAtEdge', 'MutualTLSCA'] as const) {
    const value = opts[name];
    if (!isSet(value)) continue;
    const option = `Opts.${name}`;
    if (!isMapping(value)) throw bad(option, 'it must be an object');
    cas.push(pemText(option, 'mutual_tls_ca', field(value, 'mutual_tls_ca')));
    names.push(option);
  }
  if (cas.length > 0) config.mutual_tls_certificate_authorities = cas;
  if (names.length === 0) return undefined;
  return rule(names.join(', '), [{ type: 'terminate-tls', config }]);
}

/**
 * The rules that enforce `opts` (and `extra.IPPolicyRef`) on an endpoint of `protocol`, or
 * undefined when no option asks for anything. Throws refusals.badOption (an AgentError) for an option that is
 * malformed; the policy compiler then checks the rules' values (CIDRs, header names, …).
 * @example optionRules({ BasicAuth: { credentials: [{ username: 'ops', cleartext_password: 'pa55w0rd!' }] } }, undefined, 'https')
 *   // { on_http_request: [{ name: 'Opts.BasicAuth', actions: [{ type: 'basic-auth', … }] }], … }
 */
export function optionRules(
  opts: BindOpts | undefined,
  extra: BindExtra | undefined,
  protocol: PolicyProtocol,
): OptionRules | undefined {
  const out: OptionRules = { on_tcp_connect: [], on_http_request: [], on_http_response: [] };
  const http = protocol === 'http' || protocol === 'https';
  const restrict = ipRestriction(opts ?? {}, extra);
  if (restrict) {
    // HTTP clients get a 403 they can read; TCP and TLS clients can only be disconnected.
    const phase = http ? out.on_http_request : out.on_tcp_connect;
    phase.push(rule('Opts.IPRestriction', [restrict]));
  }
  if (opts && protocol === 'tls') {
    const terminate = tlsTermination(opts);
    if (terminate) out.on_tcp_connect.push(terminate);
  }
  if (opts && http) {
    const request: Array<PolicyRule | undefined> = [
      userAgentFilter(opts),
      circuitBreaker(opts),
      webhookVerification(opts),
      basicAuth(opts),
    ];
    // Who logs in comes after basic auth and before the request's changes.
    request.push(...login(opts, 'OIDC'), ...login(opts, 'OAuth'));
    const add = headers('Opts.RequestHeaders', opts.RequestHeaders);
    if (add.length > 0) request.push(rule('Opts.RequestHeaders', add));
    for (const r of request) if (r) out.on_http_request.push(r);
    const back = headers('Opts.ResponseHeaders', opts.ResponseHeaders);
    if (back.length > 0) out.on_http_response.push(rule('Opts.ResponseHeaders', back));
    if (opts.Compression !== null && opts.Compression !== undefined && opts.Compression !== false) {
      out.on_http_response.push(
        rule('Opts.Compression', [{ type: 'compress-response', config: null }]),
      );
    }
  }
  const empty =
    out.on_tcp_connect.length + out.on_http_request.length + out.on_http_response.length === 0;
  return empty ? undefined : out;
}
