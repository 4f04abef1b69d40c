/**
 * The two bind options the tunnel carries out itself rather than as a policy rule: Opts.ProxyProto
 * (each stream to the agent starts with a PROXY protocol header, sessions/agent-tunnel.ts) and
 * Opts.HostHeaderRewrite (the agent gets `Host: <ForwardsTo's host:port>`,
 * ingress/http/http-forwarding.ts). Each is read into the bind's plan, or refused when the
 * endpoint cannot honour it.
 */
import { shorten } from '../../core/quote.js';
import type { Bind } from '../../protocol/index.js';
import { refusals } from './agent-errors.js';
import { isSet } from './bind-options.js';

/**
 * Opts.HostHeaderRewrite: on for http and https endpoints when set; refused when set on tcp or
 * tls ones, which carry no HTTP request to rewrite.
 * @example hostHeaderRewriteOf({ HostHeaderRewrite: true }, 'https') // true
 */
export function hostHeaderRewriteOf(opts: Bind['Opts'], proto: string): true | undefined {
  if (!isSet(opts?.HostHeaderRewrite)) return undefined;
  if (proto === 'http' || proto === 'https') return true;
  throw refusals.unsupportedOption(
    'Opts.HostHeaderRewrite',
    `${proto} endpoints carry no HTTP requests; the Host header is rewritten on http and https endpoints`,
  );
}

/**
 * Opts.ProxyProto as a version: unset (0, '', null) means none; 1 and 2 (SDKs send a number, some
 * configs a string) are PROXY protocol v1 and v2; anything else is refused.
 * @example proxyProtoOf({ ProxyProto: 2 }) // 2
 */
export function proxyProtoOf(opts: Bind['Opts']): 1 | 2 | undefined {
  const value: unknown = opts?.ProxyProto;
  if (value === undefined || value === null || value === 0 || value === '' || value === '0') {
    return undefined;
  }
  if (value === 1 || value === '1') return 1;
  if (value === 2 || value === '2') return 2;
  throw refusals.unsupportedOption(
    `Opts.ProxyProto ${shorten(JSON.stringify(value))}`,
    'the PROXY protocol version is 1 or 2',
  );
}
