import type { BindExtra, BindOpts } from '../../protocol/index.js';
import { refusals } from './agent-errors.js';

/**
 * Bind options the edge does not enforce. Each is refused when set, never ignored: ignoring mutual
 * TLS would expose a service its owner believes is protected (docs/protocol.md §6.2). The TLS
 * ones are enforced on tls endpoints (ENFORCED_ON), as a terminate-tls rule.
 * The others (BasicAuth, Auth, IPRestriction, Request/ResponseHeaders, Compression,
 * CircuitBreaker, UserAgentFilter, WebhookVerification, OAuth, OIDC, Extra.IPPolicyRef) are
 * enforced as policy rules: bind-option-rules.ts; ProxyProto and HostHeaderRewrite by the tunnel
 * (bind-tunnel-options.ts). Unset means absent, null, "", 0, false, or an object or list
 * holding only such values, because SDKs send every key with an empty value when an option is off.
 */
const REFUSED: ReadonlyArray<[keyof BindOpts, string]> = [
  ['MutualTLSCA', 'mutual TLS at the edge is enforced on tls endpoints only'],
  ['MutualTLSAtEdge', 'mutual TLS at the edge is enforced on tls endpoints only'],
  ['TLSTermination', 'only tls endpoints have their TLS terminated at the edge'],
  ['WebsocketTCPConverter', 'this edge does not convert websockets to TCP'],
];

/** Middleware that SDKs send as an empty object when switched on (Go: a non-nil pointer). */
const ON_WHEN_PRESENT: ReadonlySet<keyof BindOpts> = new Set(['WebsocketTCPConverter']);

/** Refused options a protocol enforces after all: on tls endpoints, as a terminate-tls rule. */
const ENFORCED_ON: Readonly<Partial<Record<keyof BindOpts, string>>> = {
  MutualTLSCA: 'tls',
  MutualTLSAtEdge: 'tls',
  TLSTermination: 'tls',
};

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
 * traffic policy (`TrafficPolicy`, `Policy`: checked by bind-traffic-policy.ts), the options
 * bind-option-rules.ts enforces, and one binding, public or internal. On `tls` endpoints (`proto`)
 * TLSTermination, MutualTLSAtEdge and MutualTLSCA are enforced too (as terminate-tls).
 * @example checkBindOptions({ Domain: 'a.example.com', BasicAuth: null }, undefined) // fine
 */
export function checkBindOptions(
  opts: BindOpts | undefined,
  extra: BindExtra | undefined,
  proto?: string,
): void {
  if (opts) {
    for (const [key, why] of REFUSED) {
      if (proto !== undefined && ENFORCED_ON[key] === proto) continue;
      const value = opts[key];
      const on = ON_WHEN_PRESENT.has(key) ? value !== null && value !== undefined : isSet(value);
      if (on) throw refusals.unsupportedOption(`Opts.${key}`, why);
    }
  }
  if (extra) {
    const bindings = Array.isArray(extra.Bindings) ? extra.Bindings : [];
    const other = bindings.find(
      (b) => typeof b !== 'string' || !['public', 'internal'].includes(b.toLowerCase()),
    );
    if (other !== undefined || bindings.length > 1) {
      throw refusals.unsupportedOption(
        `Extra.Bindings ${JSON.stringify(other ?? bindings)}`,
        'an endpoint has one binding, "public" or "internal"',
      );
    }
  }
}
