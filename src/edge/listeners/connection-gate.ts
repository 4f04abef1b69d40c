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

  /**
   * Count a connection closed by a timeout (an idle raw relay, say): in /metrics under the same
   * family, logged at debug only, since an idle connection ending is ordinary, not an attack.
   */
  timedOut(ip: string, limit: string): void {
    this.metrics?.limitRefusals.with({ limit }).inc();
    this.logger?.debug({ ip, limit }, 'connection closed by a timeout');
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
 * Caps open connections, in all and per client address, over every server it is attached to: the
 * public ingress attaches one gate to its HTTP, HTTPS and every TCP endpoint port, so an address's
 * budget is one whatever the number of ports. Installed first on each server's 'connection'
 * event, so a refused socket is destroyed before anything reads from it (a closed connection is
 * the refusal every protocol understands); the newest connection is the one refused, and what is
 * already admitted goes on.
 *
 * @example
 * const gate = new ConnectionGate({ name: 'ingress', maxTotal: 10000, maxPerIp: 256 }, refusals);
 * gate.attach(httpServer); gate.attach(tcpPortServer);
 */
export class ConnectionGate {
  private total = 0;
  private readonly perIp = new Map<string, number>();

  constructor(
    readonly limits: GateLimits,
    private readonly log: RefusalLog,
  ) {}

  /** Connections admitted and still open, over every attached server. */
  get open(): number {
    return this.total;
  }

  /** Open connections of one client (its {@link clientKey}). */
  openFrom(address: string): number {
    return this.perIp.get(clientKey(address)) ?? 0;
  }

  /**
   * Count `server`'s connections against this gate from now on. A PROXY protocol front is attached
   * with `perAddress: false`: while its connections wait for their header they count in the
   * total (they hold descriptors too) but not against the balancer's own address; once handed to
   * the inner server, also attached, they are judged again as the real client's.
   */
  attach(server: Server, options: { perAddress?: boolean } = {}): void {
    const perAddress = options.perAddress ?? true;
    server.prependListener('connection', (socket: Socket) => this.admit(socket, perAddress));
  }

  /** The address each admitted socket counts against now. */
  private readonly countedAs = new WeakMap<Socket, string>();

  private admit(socket: Socket, perAddress: boolean): void {
    const { limits } = this;
    const ip = clientKey(socket.remoteAddress ?? '');
    const counted = this.countedAs.get(socket);
    const mine = this.perIp.get(ip) ?? 0;
    const over =
      counted === undefined && this.total >= limits.maxTotal
        ? `${limits.name}_connections`
        : perAddress && counted !== ip && mine >= limits.maxPerIp
          ? `${limits.name}_connections_per_ip`
          : undefined;
    if (over) {
      this.log.refused(ip, over);
      socket.destroy();
      return;
    }
    if (counted !== undefined) {
      // Handed over by a front: the socket is in the total already, and moves to its real client.
      this.release(counted);
      this.perIp.set(ip, (this.perIp.get(ip) ?? 0) + 1);
      this.countedAs.set(socket, ip);
      return;
    }
    this.total++;
    this.perIp.set(ip, mine + 1);
    this.countedAs.set(socket, ip);
    socket.once('close', () => {
      this.total--;
      this.release(this.countedAs.get(socket) ?? ip);
    });
  }

  private release(ip: string): void {
    const n = (this.perIp.get(ip) ?? 1) - 1;
    if (n <= 0) this.perIp.delete(ip);
    else this.perIp.set(ip, n);
  }
}

/**
 * A gate of one listener's own (the agent listener).
 * @example
 * gateConnections(server, { name: 'agent', maxTotal: 5000, maxPerIp: 64 }, refusals);
 */
export function gateConnections(
  server: Server,
  limits: GateLimits,
  log: RefusalLog,
): ConnectionGate {
  const gate = new ConnectionGate(limits, log);
  gate.attach(server);
  return gate;
}
