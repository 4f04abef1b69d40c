import { isIPv6, type Server, type Socket } from 'node:net';
import { LRUCache } from 'lru-cache';
import { ipv6Groups } from '../../core/cidr.js';
import type { Logger } from '../../core/logger.js';
import type { EdgeMetrics } from '../metrics/metrics.js';

/**
 * Logs a refusal at most once per client and limit per minute, so a flood cannot flood the log.
 * @example const log = new RefusalLog(logger); log.refused('1.2.3.4', 'ingress_connections_per_ip');
 */
export class RefusalLog {
  /** Client and limit pairs logged in the period; bounded: an address spray cannot grow it. */
  private readonly logged: LRUCache<string, true>;

  constructor(
    private readonly logger: Logger | undefined,
    private readonly metrics: EdgeMetrics | undefined,
    periodMs = 60_000,
  ) {
    this.logged = new LRUCache({ max: 10_000, ttl: periodMs });
  }

  /** Count the refusal in /metrics, and log it unless this client was logged for it recently. */
  refused(ip: string, limit: string): void {
    this.metrics?.limitRefusals.with({ limit }).inc();
    const key = `${limit} ${ip}`;
    if (this.logged.has(key)) return;
    this.logged.set(key, true);
    this.logger?.warn({ ip, limit }, 'client over a limit: refused (logged once a minute)');
  }
}

/** Connection caps of one listener; a name for metrics and logs. */
export interface GateLimits {
  /** e.g. `ingress` or `agent`: the metric label is `<name>_connections` / `_per_ip`. */
  name: string;
  maxTotal: number;
  maxPerIp: number;
}

/**
 * Who a connection counts against: its IPv4 address, or the /64 of an IPv6 one, since one
 * IPv6 client is usually given a whole /64 and could otherwise open the per-IP limit once per
 * address in it.
 * @example clientKey('2001:db8:1:2:aaaa::1') // '2001:db8:1:2::/64'
 */
export function clientKey(address: string): string {
  const ip = address.replace(/^::ffff:/, '');
  if (!isIPv6(ip)) return ip;
  const prefix = ipv6Groups(ip)
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':');
  return `${prefix}::/64`;
}

/**
 * Caps the open connections of a listener, in all and per client IP. Installed first on the
 * server's 'connection' event, so a refused socket is destroyed before anything reads from it
 * (a closed connection is the refusal every protocol understands); other clients are unaffected.
 *
 * @example
 * gateConnections(server, { name: 'agent', maxTotal: 5000, maxPerIp: 64 }, refusals);
 */
export function gateConnections(server: Server, limits: GateLimits, log: RefusalLog): void {
  let total = 0;
  const perIp = new Map<string, number>();
  server.prependListener('connection', (socket: Socket) => {
    const ip = clientKey(socket.remoteAddress ?? '');
    const mine = perIp.get(ip) ?? 0;
    const over =
      total >= limits.maxTotal
        ? `${limits.name}_connections`
        : mine >= limits.maxPerIp
          ? `${limits.name}_connections_per_ip`
          : undefined;
    if (over) {
      log.refused(ip, over);
      socket.destroy();
      return;
    }
    total++;
    perIp.set(ip, mine + 1);
    socket.once('close', () => {
      total--;
      const n = (perIp.get(ip) ?? 1) - 1;
      if (n <= 0) perIp.delete(ip);
      else perIp.set(ip, n);
    });
  });
}
