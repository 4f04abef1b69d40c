import { Ring } from '../core/ring.js';
import { LRUCache } from 'lru-cache';
import type { Logger } from '../core/logger.js';
import type { PolicyPhase } from './parse.js';
import type { IpIntel } from './ip-intel.js';
import type { ConnVars } from './variables.js';

/**
 * Policy events: what `log` actions write and what the engine decided (denied, rate-limited,
 * restricted, ...). Each goes to the structured log and to a bounded in-memory ring per policy
 * owner (an edge, an endpoint), which the API serves at `GET /edges/{tcp|tls}/{id}/traffic_policy/events`.
 */

/** One rule of an IP policy, as restrict-ips consumes `ip_policies`. */
export interface IpPolicyRule {
  cidr: string;
  action: 'allow' | 'deny';
}

/** What happened. `would-*` outcomes come from actions with `enforce: false`. */
export type PolicyEventOutcome =
  | 'log'
  | 'denied'
  | 'closed'
  | 'responded'
  | 'redirected'
  | 'rate-limited'
  | 'would-rate-limit'
  | 'restricted'
  | 'would-restrict'
  | 'unauthorized'
  | 'would-unauthorize'
  | 'circuit-open'
  | 'would-circuit-open'
  | 'webhook-refused'
  | 'would-refuse-webhook'
  | 'jwt-refused'
  | 'would-refuse-jwt'
  | 'error';

/** The IP intelligence an event carries: the fields an operator filters events by. */
export interface ClientGeo {
  country_code: string;
  subdivision: string;
  city: string;
  as_number: number;
  as_organization: string;
}

/** One event, as the API returns it. */
export interface PolicyEvent {
  /** RFC 3339 with milliseconds. */
  timestamp: string;
  /** The edge or endpoint whose policy produced it. */
  owner_id: string;
  phase: PolicyPhase;
  /** The rule, by index in its phase list (and the list's name in the document) and name. */
  rule: { index: number; name: string | null };
  /** The action, by index in its rule and type; null for a rule's expression failing. */
  action: { index: number; type: string } | null;
  outcome: PolicyEventOutcome;
  message: string;
  client_ip: string;
  /** What IP intelligence knows of client_ip (`--geoip-*`); absent when it knows nothing. */
  client_geo?: ClientGeo;
  /** `log` metadata (interpolated), or details of the decision. */
  metadata: Record<string, unknown> | null;
}

/** Where a running policy sends its events. */
export interface PolicyEventSink {
  record(event: PolicyEvent): void;
}

/** Where the API reads them from. */
export interface PolicyEventSource {
  /** The owner's events, newest first. */
  eventsFor(ownerId: string): readonly PolicyEvent[];
}

/** A sink that drops everything, for policies nobody watches (and tests). */
export const DISCARD_EVENTS: PolicyEventSink = { record: () => undefined };

/**
 * A ring of policy events: pushing past capacity overwrites the oldest event.
 * @example const ring = new PolicyEventRing(2); ring.push(a); ring.push(b); ring.push(c); ring.list() // [c, b]
 */
export class PolicyEventRing extends Ring<PolicyEvent> {}

export interface PolicyEventLogOptions {
  /** Where each event is also logged (info; errors at warn). Omit to keep events in memory only. */
  logger?: Logger | undefined;
  /** Events kept per owner; default 1000. */
  perOwner?: number;
  /** Owners kept; the one idle longest is forgotten first. Default 10,000. */
  maxOwners?: number;
}

/**
 * The registry of rings, one per owner: a sink for the edge and a source for the API.
 * @example
 * const log = new PolicyEventLog({ logger });
 * policy.bind({ ownerId: edge.id, events: log });
 * log.eventsFor(edge.id)
 */
export class PolicyEventLog implements PolicyEventSink, PolicyEventSource {
  /** Past maxOwners, the owner idle longest goes. */
  private readonly rings: LRUCache<string, PolicyEventRing>;
  private readonly logger: Logger | undefined;
  private readonly perOwner: number;

  constructor(options: PolicyEventLogOptions = {}) {
    this.logger = options.logger;
    this.perOwner = options.perOwner ?? 1000;
    this.rings = new LRUCache({ max: options.maxOwners ?? 10_000 });
  }

  record(event: PolicyEvent): void {
    // get() makes the owner the most recent; set() drops the idlest one past maxOwners.
    let ring = this.rings.get(event.owner_id);
    if (!ring) this.rings.set(event.owner_id, (ring = new PolicyEventRing(this.perOwner)));
    ring.push(event);
    if (this.logger) {
      const line = `traffic policy ${event.outcome}: ${event.message}`;
      if (event.outcome === 'error') this.logger.warn({ policy_event: event }, line);
      else this.logger.info({ policy_event: event }, line);
    }
  }

  eventsFor(ownerId: string): PolicyEvent[] {
    return this.rings.peek(ownerId)?.list() ?? [];
  }

  /** Drop an owner's events (its edge or endpoint is gone). */
  forget(ownerId: string): void {
    this.rings.delete(ownerId);
  }
}

let lastMillis = NaN;
let lastIso = '';

/**
 * RFC 3339 text of `ms`; a flood of refusals records many events per millisecond, so reuse it.
 * @example isoTime(0) // '1970-01-01T00:00:00.000Z'
 */
export function isoTime(ms: number): string {
  if (ms !== lastMillis) {
    lastMillis = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

/**
 * `client_geo` of an event, when IP intelligence knows the client (looked up once per phase run).
 * @example ({ ...clientGeo(activation.conn) }) // {} or { client_geo: { country_code: 'FR', … } }
 */
export function clientGeo(conn: ConnVars): { client_geo?: ClientGeo } {
  const geo = geoOf(conn.client_ip_info.intel);
  return geo ? { client_geo: geo } : {};
}

/**
 * The `client_geo` fields of what IP intelligence says of an address (events and the traffic
 * inspector show the same), or undefined when it knows neither its place nor its network.
 * @example geoOf(lookupIpIntel('192.0.2.1')) // { country_code: 'FR', … } or undefined
 */
export function geoOf(i: IpIntel | undefined): ClientGeo | undefined {
  if (!i || (i.country_code === undefined && i.as_number === undefined && i.city === undefined)) {
    return undefined;
  }
  return {
    country_code: i.country_code ?? '',
    subdivision: i.subdivision ?? '',
    city: i.city ?? '',
    as_number: i.as_number ?? 0,
    as_organization: i.as_organization ?? '',
  };
}

/**
 * `value` with `redact` applied to every string in it, keys included; redacting the values
 * themselves (not their JSON text) finds a secret however JSON would escape it, and a short one
 * cannot break the structure.
 * @example redactStrings({ a: 'k=s3cret' }, (t) => t.replace('s3cret', '[secret]')) // { a: 'k=[secret]' }
 */
export function redactStrings(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === 'string') return redact(value);
  if (Array.isArray(value)) return value.map((v) => redactStrings(v, redact));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [redact(k), redactStrings(v, redact)]),
    );
  }
  return value;
}
