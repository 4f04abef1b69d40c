/**
 * The bind options of the agent SDKs (`BasicAuth`, `IPRestriction`, `RequestHeaders`, …) as the
 * traffic policy rules that enforce them, the translation ngrok documents from its modules to
 * actions. The rules run before the endpoint's own traffic policy, in the order below: who may
 * connect (IP restriction, user agents), then the circuit breaker, then who is authenticated
 * (webhook signature, basic auth, OIDC or OAuth login), then the request's changes; on the way
 * back, header changes, then compression. On tls endpoints, TLS termination and mutual TLS (terminate-tls) come right
 * after the IP restriction, so refused addresses cost no handshake.
 */
import {
  basicAuthRule,
  circuitBreakerRule,
  compressionRule,
  headerPair,
  headerRule,
  loginRules,
  lowerValues,
  restrictIpsRule,
  userAgentRule,
  webhookRule,
} from '../../policy/option-rule-builders.js';
import { isMapping, type Mapping } from '../../policy/actions/config.js';
import type { OptionRules } from '../../policy/endpoint-options.js';
import type { PolicyProtocol, PolicyRule } from '../../policy/index.js';
import type { BindExtra, BindOpts } from '../../protocol/index.js';
import { refusals } from './agent-errors.js';
import { isSet } from './bind-options.js';

/** The rules an endpoint's options add, by phase (built by src/policy/endpoint-options.ts). */
export type { OptionRules };

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
  return basicAuthRule('Opts.BasicAuth', pairs);
}

function ipRestriction(opts: BindOpts, extra: BindExtra | undefined): PolicyRule | undefined {
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
  return restrictIpsRule('Opts.IPRestriction', allow, deny, policies);
}

/**
 * `{add: ["name:value"], remove: ["name"]}` as remove-headers, then add-headers (10 at a time); a
 * header named again (in `add`, or in `add_parsed` too) keeps its last value.
 */
function headers(
  option: 'RequestHeaders' | 'ResponseHeaders',
  opts: BindOpts,
): PolicyRule | undefined {
  const name = `Opts.${option}`;
  const value = opts[option];
  if (!isSet(value)) return undefined;
  if (!isMapping(value)) throw bad(name, 'it must be an object');
  const remove = strings(name, field(value, 'remove'));
  const add = new Map<string, string>();
  for (const entry of strings(name, field(value, 'add'))) {
    const pair = headerPair(entry);
    if (!pair) throw bad(name, `${JSON.stringify(entry)} is not "name:value"`);
    add.set(...pair);
  }
  const parsed = field(value, 'add_parsed') ?? value.addParsed;
  if (isMapping(parsed)) {
    for (const [header, v] of Object.entries(parsed)) {
      if (typeof v === 'string') add.set(header.toLowerCase(), v);
    }
  }
  return headerRule(name, remove, [...add]);
}

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
  return userAgentRule('Opts.UserAgentFilter', allow, deny);
}

function circuitBreaker(opts: BindOpts): PolicyRule | undefined {
  const value = opts.CircuitBreaker;
  if (!isSet(value)) return undefined;
  const threshold = isMapping(value) ? field(value, 'error_threshold') : undefined;
  if (typeof threshold !== 'number' || !(threshold > 0 && threshold <= 1)) {
    throw bad('Opts.CircuitBreaker', 'error_threshold must be a share above 0 and at most 1');
  }
  return circuitBreakerRule('Opts.CircuitBreaker', threshold);
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
  return webhookRule('Opts.WebhookVerification', provider, secret);
}

/** A list of strings in option `option` (field `name`), lowercased and trimmed, empties dropped. */
const lowered = (option: string, value: Mapping, name: string): string[] =>
  lowerValues(strings(option, field(value, name)));

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
  const emails = lowered(name, value, 'allow_emails');
  const domains = lowered(name, value, 'allow_domains').map((d) => d.replace(/^@/, ''));
  const kind = option === 'OIDC' ? 'oidc' : 'oauth';
  return loginRules(kind, name, config, { emails, domains, denyName: `${name} allow list` });
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
  return { name: names.join(', '), expressions: [], actions: [{ type: 'terminate-tls', config }] };
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
    (http ? out.on_http_request : out.on_tcp_connect).push(restrict);
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
    request.push(...login(opts, 'OIDC'), ...login(opts, 'OAuth'), headers('RequestHeaders', opts));
    for (const r of request) if (r) out.on_http_request.push(r);
    const compress = present(opts.Compression) && opts.Compression !== false;
    const response = [
      headers('ResponseHeaders', opts),
      compress ? compressionRule('Opts.Compression') : undefined,
    ];
    for (const r of response) if (r) out.on_http_response.push(r);
  }
  const empty =
    out.on_tcp_connect.length + out.on_http_request.length + out.on_http_response.length === 0;
  return empty ? undefined : out;
}
