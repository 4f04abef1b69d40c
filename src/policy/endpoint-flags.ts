/**
 * ngrok's endpoint flags (`--basic-auth`, `--cidr-allow`, `--oauth`, …) as words, shared by the
 * two front ends that take them as flags: `burrow http|tcp|tls` (src/cli/endpoint-flags.ts adds
 * them to commander) and the commands of SSH tunnels (`ssh -R … host http --basic-auth …`,
 * src/edge/ssh/ssh-command.ts parses them). Here: each option's flag, which flags repeat, which
 * take no value, and the flags → rules → one traffic policy translation, naming every rule and
 * error after its flag. The translation of options to rules is endpoint-options.ts's.
 */
import {
  EndpointOptionError,
  optionRules,
  type EndpointOptionKey,
  type EndpointOptions,
  type EndpointProto,
  type OptionNaming,
  type OptionRules,
} from './endpoint-options.js';
import { trafficPolicyWithRules } from './option-rules-merge.js';

/** The endpoint flags as parsed (repeatable ones are lists, each value maybe comma-separated). */
export interface EndpointFlags extends Omit<EndpointOptions, 'circuitBreaker'> {
  circuitBreaker?: string;
  /** `--host-header rewrite`: a bind option (HostHeaderRewrite), not a rule. */
  hostHeader?: string;
}

/** Each option's flag. */
export const ENDPOINT_FLAGS: Readonly<Record<EndpointOptionKey, string>> = {
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

/** Each flag, the option's and `--host-header`'s (a bind option, not a rule). */
export const FLAG_NAMES: Readonly<Record<keyof EndpointFlags, string>> = {
  ...ENDPOINT_FLAGS,
  hostHeader: '--host-header',
};

/** Flags that may be given more than once (and take comma-separated lists). */
export const REPEATABLE_FLAGS: ReadonlySet<keyof EndpointFlags> = new Set<keyof EndpointFlags>([
  'basicAuth',
  'cidrAllow',
  'cidrDeny',
  'requestHeaderAdd',
  'requestHeaderRemove',
  'responseHeaderAdd',
  'responseHeaderRemove',
  'uaFilterAllow',
  'uaFilterDeny',
  'oauthScope',
  'oauthAllowEmail',
  'oauthAllowDomain',
  'oidcScope',
  'oidcAllowEmail',
  'oidcAllowDomain',
]);

/** Flags that take no value (switches). */
export const SWITCH_FLAGS: ReadonlySet<keyof EndpointFlags> = new Set<keyof EndpointFlags>([
  'compression',
]);

/** Flags every protocol takes; the others are http's. */
export const ALL_PROTO_FLAGS: ReadonlySet<keyof EndpointFlags> = new Set<keyof EndpointFlags>([
  'cidrAllow',
  'cidrDeny',
]);

/** Rules and errors name the flag (a flag's values are not numbered). */
const FLAG_NAMING: OptionNaming = {
  name: (key) => ENDPOINT_FLAGS[key],
  example: (key, value) => `${ENDPOINT_FLAGS[key]} '${value}'`,
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
export function flagRules(flags: EndpointFlags, proto: EndpointProto): OptionRules {
  if (proto === 'http') hostHeaderRewrite(flags.hostHeader);
  return optionRules(asOptions(flags), proto, FLAG_NAMING);
}

/**
 * The traffic policy text to bind an endpoint of `proto` with: the policy's text unchanged when
 * no flag adds a rule, else one JSON document with the flags' rules first, then the policy's.
 * Each flag's rule, the policy and the whole are checked with the policy engine first, so a bad
 * flag fails before anything connects, with a message that starts with the flag.
 * `policy.field` names where the policy came from (`--policy-file app.yml`).
 * @example endpointTrafficPolicy({ basicAuth: ['ops:correct-horse'] }, 'http', undefined)
 *   // '{"on_http_request":[{"name":"--basic-auth","expressions":[],"actions":[{"type":"basic-auth","config":{"credentials":["ops:correct-horse"]}}]}]}'
 */
export function endpointTrafficPolicy(
  flags: EndpointFlags,
  proto: EndpointProto,
  policy: { field: string; text: string } | undefined,
  wholeField = 'the endpoint flags with the traffic policy',
): string | undefined {
  return trafficPolicyWithRules(flagRules(flags, proto), proto, policy, wholeField);
}
