/**
 * Upgrades (WebSocket) on the full HTTP path: routed by Host like any request, through their
 * endpoint's policy and any forward-internal, then the request head is written into a fresh tunnel
 * stream and the two become a raw relay; the agent's answer (101 or not) is relayed unparsed.
 * Every endpoint an upgrade went through counts it.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { relay, type Relay } from '../../../core/relay.js';
import { DEFAULT_LIMITS } from '../../../core/limits.js';
import { relayTimeoutsFor, relayTimeoutsOf, type RawRelayTimeouts } from '../proxy.js';
import type { EndpointMeter, EndpointMeters } from '../../metrics/endpoint-meters.js';
import { clientIp, connectTunnel, proxyInfoOf } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, TunnelRegistry } from '../../registry/tunnel-registry.js';
import {
  failureDetail,
  INGRESS_ERRORS,
  rawErrorResponse,
  type IngressError,
} from '../error-pages.js';
import type { PublicConnections } from './http-connections.js';
import { forwardStep } from './http-forward-internal.js';
import {
  forwardRequestHeaders,
  publicProto,
  requestHead,
  rewrittenHost,
  routingHost,
} from './http-forwarding.js';
import { runUpgradePolicy, type HttpPolicyFlow } from './http-policy.js';
import { lookupHttpTunnel, readIncomingTarget } from './http-routing.js';

export interface HttpUpgradesOptions {
  registry: TunnelRegistry;
  meters: EndpointMeters;
  connections: PublicConnections;
  /** Wait for a tunnel stream this long before answering 502. */
  connectTimeoutMs: number | undefined;
  /** When upgraded relays end for going quiet; default DEFAULT_LIMITS' (1 h, 30 s half-closed). */
  relayTimeouts?: RawRelayTimeouts | undefined;
}

/**
 * @example
 * const upgrades = new HttpUpgrades({ registry, meters, connections, connectTimeoutMs });
 * httpServer.on('upgrade', upgrades.onUpgrade);
 */
export class HttpUpgrades {
  private readonly registry: TunnelRegistry;
  private readonly meters: EndpointMeters;
  private readonly connections: PublicConnections;
  private readonly connectTimeoutMs: number | undefined;
  private readonly relayTimeouts: RawRelayTimeouts;
  private readonly relays = new Set<Relay>();

  constructor(options: HttpUpgradesOptions) {
    this.registry = options.registry;
    this.meters = options.meters;
    this.connections = options.connections;
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.relayTimeouts = options.relayTimeouts ?? relayTimeoutsOf(DEFAULT_LIMITS);
  }

  /** Relays still open. */
  get size(): number {
    return this.relays.size;
  }

  /** Close every relay now. */
  destroyAll(): void {
    for (const relayed of this.relays) relayed.destroy();
  }

  /** The http server's 'upgrade' listener. */
  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // The HTTP server dropped its own listeners when it handed the socket over.
    socket.on('error', () => socket.destroy());
    const host = routingHost(req.headers.host);
    // The target is read once, as for every request (http-routing.ts readIncomingTarget).
    const badTarget = readIncomingTarget(req);
    if (badTarget) {
      this.meters.unrouted.request(INGRESS_ERRORS.badRequestTarget.status);
      socket.end(rawErrorResponse(INGRESS_ERRORS.badRequestTarget, host ?? '', badTarget));
      return;
    }
    const found = lookupHttpTunnel(this.registry, host, req.socket);
    if ('status' in found) {
      this.meters.unrouted.request(found.status);
      socket.end(rawErrorResponse(found, host ?? ''));
      return;
    }
    // Pooled endpoints: the policy and the relay of one upgrade belong to one member.
    this.serveUpgrade(req, socket, head, this.registry.pick(found), [], []);
  };

  /**
   * Serve an upgrade at `tunnel` (a pool member already picked), as a request is served
   * (http-requests.ts): its policy, then a forward-internal to the next endpoint, the relay to
   * its agent, or for a cloud endpoint the error page. `chain` names the endpoints it went
   * through before this one, and `via` holds their meters, which count the upgrade too.
   */
  private serveUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    chain: readonly string[],
    via: readonly EndpointMeter[],
  ): void {
    const meters = [...via, this.meters.of(tunnel)];
    const policy = tunnel.policy;
    if (!policy) {
      this.afterUpgradePolicy(req, socket, head, tunnel, chain, meters, undefined);
      return;
    }
    runUpgradePolicy(req, socket, policy, (flow) =>
      this.afterUpgradePolicy(req, socket, head, tunnel, chain, meters, flow),
    );
  }

  private afterUpgradePolicy(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    chain: readonly string[],
    meters: readonly EndpointMeter[],
    flow: HttpPolicyFlow | undefined,
  ): void {
    const host = routingHost(req.headers.host) ?? '';
    const refuse = (error: IngressError, detail?: string): void => {
      for (const meter of meters) meter.request(error.status);
      socket.end(rawErrorResponse(error, host, detail));
    };
    const step = flow && forwardStep(this.registry, req, tunnel, chain, flow);
    if (step && 'refused' in step) {
      refuse(step.refused, step.detail);
      return;
    }
    if (step) {
      this.serveUpgrade(req, socket, head, step.next, step.chain, meters);
      return;
    }
    if (tunnel.cloud) {
      refuse(INGRESS_ERRORS.cloudUnanswered);
      return;
    }
    this.relayUpgrade(req, socket, head, tunnel, meters, flow);
  }

  /** Relay an upgrade to `tunnel`'s agent; `flow` once the tunnel's policy let it through. */
  private relayUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    meters: readonly EndpointMeter[],
    flow: HttpPolicyFlow | undefined,
  ): void {
    const meter = this.meters.of(tunnel);
    this.connections.handOver(socket, meter);
    const proto = publicProto(socket);
    const forwarded = forwardRequestHeaders(req, {
      proto,
      clientIp: clientIp(socket as Socket),
      upgrade: true,
      host: rewrittenHost(tunnel),
    });
    const headers = flow ? flow.requestHeaders(forwarded) : forwarded;
    const info = proxyInfoOf(socket, proto, false);
    connectTunnel(tunnel, info, this.connectTimeoutMs).then(
      (stream) => {
        if (socket.destroyed) {
          stream.destroy();
          return;
        }
        stream.write(requestHead(req, headers));
        if (head.length > 0) stream.write(head);
        // Counted when handed over; the agent's answer is relayed unparsed.
        for (const passed of meters) passed.request(101);
        const relayed = relay(socket, stream, {
          bytesIn: meter.bytesIn,
          bytesOut: meter.bytesOut,
          onClose: () => this.relays.delete(relayed),
          timeouts: relayTimeoutsFor(this.relayTimeouts, socket),
        });
        this.relays.add(relayed);
      },
      (err: NodeJS.ErrnoException) => {
        const status = INGRESS_ERRORS.tunnelUnreachable.status;
        for (const passed of meters) passed.request(status);
        const detail = failureDetail(err);
        const host = routingHost(req.headers.host) ?? '';
        socket.end(rawErrorResponse(INGRESS_ERRORS.tunnelUnreachable, host, detail));
      },
    );
  }
}
