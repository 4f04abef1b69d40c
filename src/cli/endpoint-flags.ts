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
  endpointTrafficPolicy as flagsTrafficPolicy,
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
