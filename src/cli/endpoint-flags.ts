/**
 * ngrok's endpoint flags for `burrow http|tcp|tls` (`--basic-auth`, `--cidr-allow`,
 * `--request-header-add`, `--oauth`, …) as the traffic policy rules that enforce them. The
 * translation itself is shared with the device agent's tunnel options
 * (src/policy/endpoint-options.ts), and the flags' names with it (src/policy/endpoint-flags.ts,
 * which SSH tunnels' commands parse too); this file adds the flags to commander.
 *
 * Flag rules run before the rules of `--policy-file`; {@link endpointTrafficPolicy} merges both
 * into the one document the endpoint is bound with, after checking it with the policy engine.
 */
import { Option, type Command } from 'commander';
import type { EndpointProto } from '../policy/endpoint-options.js';
import {
  ALL_PROTO_FLAGS,
  endpointTrafficPolicy as flagsTrafficPolicy,
  FLAG_NAMES,
  REPEATABLE_FLAGS,
  SWITCH_FLAGS,
  type EndpointFlags,
} from '../policy/endpoint-flags.js';

// The flags' vocabulary and translation are shared with SSH tunnels' commands (src/edge/ssh).
export { flagRules, hostHeaderRewrite, type EndpointFlags } from '../policy/endpoint-flags.js';

export type TunnelProto = EndpointProto;

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
  const own = file && { field: `--policy-file ${file.path}`.trim(), text: file.text };
  return flagsTrafficPolicy(flags, proto, own, 'the endpoint flags with --policy-file');
}

const collect = (value: string, previous: string[] | undefined): string[] => [
  ...(previous ?? []),
  value,
];

/**
 * Each flag's value name (none for a switch) and help, in the order `--help` lists them; the
 * flags' names, which repeat and which every protocol takes are the shared vocabulary's
 * (src/policy/endpoint-flags.ts), which SSH tunnels' commands parse too.
 */
const FLAG_HELP: Readonly<Record<keyof EndpointFlags, readonly [string | undefined, string]>> = {
  cidrAllow: ['cidr', 'accept only clients in this CIDR block → restrict-ips allow'],
  cidrDeny: ['cidr', 'refuse clients in this CIDR block → restrict-ips deny'],
  basicAuth: ['user:password', 'require HTTP Basic credentials → basic-auth'],
  requestHeaderAdd: ['name:value', 'add a header to requests → add-headers'],
  requestHeaderRemove: ['name', 'remove a header from requests → remove-headers'],
  responseHeaderAdd: ['name:value', 'add a header to responses → add-headers'],
  responseHeaderRemove: ['name', 'remove a header from responses → remove-headers'],
  compression: [undefined, 'compress responses (gzip, br, deflate) → compress-response'],
  hostHeader: [
    'rewrite',
    'rewrite: send the local service its own host:port as Host → HostHeaderRewrite',
  ],
  uaFilterAllow: ['regex', 'accept only these user agents → deny'],
  uaFilterDeny: ['regex', 'refuse these user agents → deny'],
  circuitBreaker: [
    'ratio',
    'answer 503 while the share of 5xx responses is above this ratio → circuit-breaker',
  ],
  oauth: ['provider', 'require OAuth login → oauth'],
  oauthClientId: ['id', 'the OAuth client id registered with the provider'],
  oauthClientSecret: ['secret', 'the OAuth client secret'],
  oauthScope: ['scope', 'an OAuth scope to request'],
  oauthAllowEmail: ['email', 'let only this email in after an OAuth login → deny'],
  oauthAllowDomain: ['domain', 'let only emails of this domain in → deny'],
  oidc: ['issuer-url', 'require OpenID Connect login → openid-connect'],
  oidcClientId: ['id', 'the OpenID Connect client id registered with the provider'],
  oidcClientSecret: ['secret', 'the OpenID Connect client secret'],
  oidcScope: ['scope', 'an OpenID Connect scope to request'],
  oidcAllowEmail: ['email', 'let only this email in after an OpenID Connect login → deny'],
  oidcAllowDomain: ['domain', 'let only emails of this domain in → deny'],
  verifyWebhook: ['provider', 'check webhook signatures → verify-webhook'],
  verifyWebhookSecret: ['secret', 'the webhook signing secret'],
};

/**
 * Add the endpoint flags of `proto` to a `burrow http|tcp|tls` command: `--cidr-allow` and
 * `--cidr-deny` on all three, the others on http.
 * @example addEndpointFlags(program.command('http'), 'http');
 */
export function addEndpointFlags(cmd: Command, proto: TunnelProto): Command {
  for (const [key, [value, help]] of Object.entries(FLAG_HELP) as [
    keyof EndpointFlags,
    readonly [string | undefined, string],
  ][]) {
    if (proto !== 'http' && !ALL_PROTO_FLAGS.has(key)) continue;
    const flags = SWITCH_FLAGS.has(key) ? FLAG_NAMES[key] : `${FLAG_NAMES[key]} <${value}>`;
    if (REPEATABLE_FLAGS.has(key)) {
      cmd.addOption(new Option(flags, `${help} (repeatable)`).argParser(collect));
    } else cmd.option(flags, help);
  }
  return cmd;
}
