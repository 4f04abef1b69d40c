/**
 * ngrok's endpoint flags for `burrow http|tcp|tls` (`--basic-auth`, `--cidr-allow`,
 * `--request-header-add`, `--oauth`, …) as the traffic policy rules that enforce them. The
 * translation itself is shared with the device agent's tunnel options
 * (src/policy/endpoint-options.ts); this file adds the flags to commander, splits the flags that
 * take comma-separated lists, and names every rule and error after its flag.
 *
 * Flag rules run before the rules of `--policy-file`; {@link endpointTrafficPolicy} merges both
 * into the one document the endpoint is bound with, after checking it with the policy engine.
 */
import { Option, type Command } from 'commander';
import {
  EndpointOptionError,
  optionRules,
  type EndpointOptionKey,
  type EndpointOptions,
  type EndpointProto,
  type OptionNaming,
  type OptionRules,
} from '../policy/endpoint-options.js';
import { trafficPolicyWithRules } from '../policy/option-rules-merge.js';

export type TunnelProto = EndpointProto;

/** The endpoint flags as commander parses them (repeatable ones are lists). */
export interface EndpointFlags extends Omit<EndpointOptions, 'circuitBreaker'> {
  circuitBreaker?: string;
  /** `--host-header rewrite`: a bind option (HostHeaderRewrite), not a rule. */
  hostHeader?: string;
}

const FLAGS: Record<EndpointOptionKey, string> = {
  basicAuth: '--basic-auth',
  cidrAllow: '--cidr-allow',
  cidrDeny: '--cidr-deny',
  requestHeaderAdd: '--request-header-add',
  requestHeaderRemove: '--request-header-remove',
  responseHeaderAdd: '--response-header-add',
  responseHeaderRemove: '--response-header-remove',
  compression: '--compression',
  uaFilterAllow: '--ua-filter-allow',
  uaFilterDeny: '--ua-filter-deny',
  circuitBreaker: '--circuit-breaker',
  oauth: '--oauth',
  oauthClientId: '--oauth-client-id',
  oauthClientSecret: '--oauth-client-secret',
  oauthScope: '--oauth-scope',
  oauthAllowEmail: '--oauth-allow-email',
  oauthAllowDomain: '--oauth-allow-domain',
  oidc: '--oidc',
  oidcClientId: '--oidc-client-id',
  oidcClientSecret: '--oidc-client-secret',
  oidcScope: '--oidc-scope',
  oidcAllowEmail: '--oidc-allow-email',
  oidcAllowDomain: '--oidc-allow-domain',
  verifyWebhook: '--verify-webhook',
  verifyWebhookSecret: '--verify-webhook-secret',
};

/** Rules and errors name the flag (a flag's values are not numbered). */
const FLAG_NAMING: OptionNaming = {
  name: (key) => FLAGS[key],
  example: (key, value) => `${FLAGS[key]} '${value}'`,
};

/** Values of a repeatable flag that also takes comma-separated lists, as ngrok's do. */
function commaList(values: string[] | undefined): string[] | undefined {
  if (values === undefined) return undefined;
  return values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

/**
 * `--host-header rewrite` → the bind option HostHeaderRewrite (the SDK's `hostHeaderRewrite`):
 * the edge sends the local service `Host: <its host:port>`, the public host stays in
 * X-Forwarded-Host. Not a rule: the edge sets the Host header itself (a policy's change to it is
 * ignored). ngrok's other form, a literal host (`--host-header example.com`), is refused: the
 * edge has no such option and this agent forwards requests unchanged, so nothing would set it.
 * @example hostHeaderRewrite('rewrite') // true
 * @example hostHeaderRewrite(undefined) // false
 */
export function hostHeaderRewrite(value: string | undefined): boolean {
  if (value === undefined) return false;
  if (value.trim().toLowerCase() === 'rewrite') return true;
  throw new EndpointOptionError(
    '--host-header',
    `${JSON.stringify(value)} is not supported: only "rewrite" is (the local service then gets its own host:port as Host, and the public host in X-Forwarded-Host); a literal host is not, as the edge and this agent pass the Host on unchanged otherwise`,
  );
}

/** The flags as the shared translation takes them: comma-separated lists split. */
function asOptions(flags: EndpointFlags): EndpointOptions {
  // --host-header is a bind option, not a rule: see hostHeaderRewrite.
  const { hostHeader: _bindOption, ...options } = flags;
  return {
    ...options,
    cidrAllow: commaList(flags.cidrAllow),
    cidrDeny: commaList(flags.cidrDeny),
    oauthScope: commaList(flags.oauthScope),
    oauthAllowEmail: commaList(flags.oauthAllowEmail),
    oauthAllowDomain: commaList(flags.oauthAllowDomain),
    oidcScope: commaList(flags.oidcScope),
    oidcAllowEmail: commaList(flags.oidcAllowEmail),
    oidcAllowDomain: commaList(flags.oidcAllowDomain),
  };
}

/**
 * The rules that enforce `flags` on an endpoint of `proto`, by phase, in the order of
 * bind-option-rules.ts. Throws {@link EndpointOptionError} naming the flag for a malformed value;
 * the policy engine checks the rest (header names, regexes) in {@link endpointTrafficPolicy}.
 * @example flagRules({ cidrDeny: ['10.0.0.0/8'] }, 'tcp').on_tcp_connect
 *   // [{ name: '--cidr-deny', expressions: [], actions: [{ type: 'restrict-ips', config: { deny: ['10.0.0.0/8'] } }] }]
 */
export function flagRules(flags: EndpointFlags, proto: TunnelProto): OptionRules {
  if (proto === 'http') hostHeaderRewrite(flags.hostHeader);
  return optionRules(asOptions(flags), proto, FLAG_NAMING);
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
  const own = file && { field: `--policy-file ${file.path}`.trim(), text: file.text };
  return trafficPolicyWithRules(rules, proto, own, 'the endpoint flags with --policy-file');
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
  cmd.option(
    '--host-header <rewrite>',
    'rewrite: send the local service its own host:port as Host → HostHeaderRewrite',
  );
  list('--ua-filter-allow <regex>', 'accept only these user agents → deny');
  list('--ua-filter-deny <regex>', 'refuse these user agents → deny');
  cmd.option(
    '--circuit-breaker <ratio>',
    'answer 503 while the share of 5xx responses is above this ratio → circuit-breaker',
  );
  // The two logins take the same flags, under their own prefix.
  const login = (flag: string, value: string, what: string, action: string): void => {
    cmd.option(`--${flag} <${value}>`, `require ${what} login → ${action}`);
    cmd.option(`--${flag}-client-id <id>`, `the ${what} client id registered with the provider`);
    cmd.option(`--${flag}-client-secret <secret>`, `the ${what} client secret`);
    list(`--${flag}-scope <scope>`, `an ${what} scope to request`);
    list(`--${flag}-allow-email <email>`, `let only this email in after an ${what} login → deny`);
    list(`--${flag}-allow-domain <domain>`, 'let only emails of this domain in → deny');
  };
  login('oauth', 'provider', 'OAuth', 'oauth');
  login('oidc', 'issuer-url', 'OpenID Connect', 'openid-connect');
  cmd.option('--verify-webhook <provider>', 'check webhook signatures → verify-webhook');
  cmd.option('--verify-webhook-secret <secret>', 'the webhook signing secret');
  return cmd;
}
