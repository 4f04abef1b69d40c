import type { BindExtra, BindOpts } from '../protocol/index.js';
import { refusals } from './agent-errors.js';

/**
 * Bind options the edge does not enforce yet. Each is refused when set, never ignored: ignoring
 * BasicAuth, OAuth or an IP restriction would expose a service its owner believes is protected
 * (agent-protocol.md §5). Unset means absent, null, "", 0, false, or an object or list holding
 * only such values, because SDKs send every key with an empty value when an option is off.
 */
const REFUSED: ReadonlyArray<[keyof BindOpts, string]> = [
  ['BasicAuth', 'basic authentication is not enforced by this edge'],
  ['Auth', 'basic authentication is not enforced by this edge'],
  ['OAuth', 'OAuth is not enforced by this edge'],
  ['OIDC', 'OpenID Connect is not enforced by this edge'],
  ['WebhookVerification', 'webhook verification is not enforced by this edge'],
  ['MutualTLSCA', 'mutual TLS at the edge is not enforced for agent endpoints'],
  ['MutualTLSAtEdge', 'mutual TLS at the edge is not enforced for agent endpoints'],
  ['IPRestriction', 'IP restrictions on agent endpoints are not enforced yet (use an edge)'],
  ['TLSTermination', 'TLS endpoints are passed through to the agent, never terminated at the edge'],
  ['ProxyProto', 'PROXY protocol headers are not sent to agents yet'],
  ['Compression', 'this edge does not compress responses'],
  ['CircuitBreaker', 'this edge has no circuit breaker'],
  ['RequestHeaders', 'this edge does not rewrite request headers'],
  ['ResponseHeaders', 'this edge does not rewrite response headers'],
  ['WebsocketTCPConverter', 'this edge does not convert websockets to TCP'],
  ['UserAgentFilter', 'this edge does not filter user agents'],
  ['HostHeaderRewrite', 'this edge does not rewrite the Host header'],
];

/** Middleware that SDKs send as an empty object when switched on (Go: a non-nil pointer). */
const ON_WHEN_PRESENT: ReadonlySet<keyof BindOpts> = new Set([
  'Compression',
  'WebsocketTCPConverter',
]);

/**
 * Whether an option value means "switched on".
 * @example isSet(null) // false
 * @example isSet({ Cidrs: [] }) // false
 * @example isSet({ Cidrs: ['10.0.0.0/8'] }) // true
 */
export function isSet(value: unknown): boolean {
  if (value === null || value === undefined || value === false) return false;
  if (typeof value === 'string') return value.trim() !== '' && value.trim() !== '0';
  if (typeof value === 'number') return value !== 0;
  if (Array.isArray(value)) return value.some(isSet);
  if (typeof value === 'object') return Object.values(value).some(isSet);
  return true;
}

/**
 * Throw the refusal for the first option that is set but not enforced, naming it. Accepts the
 * options a plain endpoint needs (names, addresses, LocalUrlScheme, MutualTLSAtAgent), the
 * traffic policy (`TrafficPolicy`, `Policy`: checked by bind-traffic-policy.ts) and only the
 * public binding.
 * @example checkBindOptions({ Domain: 'a.example.com', BasicAuth: null }, undefined) // fine
 */
export function checkBindOptions(opts: BindOpts | undefined, extra: BindExtra | undefined): void {
  if (opts) {
    for (const [key, why] of REFUSED) {
      const value = opts[key];
      const on = ON_WHEN_PRESENT.has(key) ? value !== null && value !== undefined : isSet(value);
      if (on) throw refusals.unsupportedOption(`Opts.${key}`, why);
    }
  }
  if (extra) {
    if (isSet(extra.IPPolicyRef)) {
      throw refusals.unsupportedOption(
        'Extra.IPPolicyRef',
        'IP policies on agent endpoints are not enforced yet (use an edge)',
      );
    }
    const bindings = Array.isArray(extra.Bindings) ? extra.Bindings : [];
    const other = bindings.find((b) => typeof b !== 'string' || b.toLowerCase() !== 'public');
    if (other !== undefined) {
      throw refusals.unsupportedOption(
        `Extra.Bindings ${JSON.stringify(other)}`,
        'every endpoint of this server is public; only the "public" binding exists',
      );
    }
  }
}
