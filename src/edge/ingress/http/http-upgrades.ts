/**
 * Upgrades (WebSocket and friends) on the full HTTP path: routed by Host like any request, through
 * their endpoint's policy and any forward-internal, then sent to the agent on a fresh tunnel
 * stream. Only a 101 from the agent makes the connection a raw relay; any other answer is relayed
 * as an HTTP response and the connection goes on under HTTP rules (upgrade-exchange.ts). Every
 * endpoint an upgrade went through counts it.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { EndpointMeter, EndpointMeters } from '../../metrics/endpoint-meters.js';
import { clientIp, proxyInfoOf } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, TunnelRegistry } from '../../registry/tunnel-registry.js';
import { INGRESS_ERRORS, rawErrorResponse, type IngressError } from '../error-pages.js';
import type { PublicConnections } from './http-connections.js';
import { forwardStep } from './http-forward-internal.js';
import {
  forwardRequestHeaders,
  publicProto,
  rewrittenHost,
  routingHost,
} from './http-forwarding.js';
import { runUpgradePolicy, type HttpPolicyFlow } from './http-policy.js';
import type { RawRelays } from './protocol-switch.js';
import { lookupHttpTunnel, readIncomingTarget } from './http-routing.js';
import { UpgradeExchange, type UpgradeContext } from './upgrade-exchange.js';

export interface HttpUpgradesOptions {
  registry: TunnelRegistry;
  meters: EndpointMeters;
  connections: PublicConnections;
  /** Wait for a tunnel stream this long before answering 502. */
  connectTimeoutMs: number | undefined;
  /** The ingress's raw relays, which a connection joins after a 101 (protocol-switch.ts). */
  raw: RawRelays;
  /** True once the ingress drains: a connection whose upgrade was not taken then closes. */
  draining: () => boolean;
  /** Serve the rest of a connection on the full HTTP path; `buffered` was read, not served. */
  handBack: (socket: Duplex, buffered: Buffer | undefined) => void;
}

/**
 * @example
 * const upgrades = new HttpUpgrades({ registry, meters, connections, connectTimeoutMs, raw, draining, handBack });
 * httpServer.on('upgrade', upgrades.onUpgrade);
 */
export class HttpUpgrades {
  private readonly registry: TunnelRegistry;
  private readonly meters: EndpointMeters;
  private readonly context: UpgradeContext;

  constructor(options: HttpUpgradesOptions) {
    this.registry = options.registry;
    this.meters = options.meters;
    const { draining } = options;
    this.context = {
      connections: options.connections,
      connectTimeoutMs: options.connectTimeoutMs,
      raw: options.raw,
      released: options.meters.metrics.streamsReleased.with({ path: 'upgrade' }),
      get draining() {
        return draining();
      },
      handBack: options.handBack,
    };
  }

  /** The http server's 'upgrade' listener. */
  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // The HTTP server dropped its own listeners when it handed the socket over.
    socket.on('error', destroyOnError);
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

  /**
   * Send an upgrade to `tunnel`'s agent, `flow` once the tunnel's policy let it through; the
   * agent's answer decides what the connection becomes (upgrade-exchange.ts).
   */
  private relayUpgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    tunnel: OnlineTunnel,
    meters: readonly EndpointMeter[],
    flow: HttpPolicyFlow | undefined,
  ): void {
    const proto = publicProto(socket);
    const forwarded = forwardRequestHeaders(req, {
      proto,
      clientIp: clientIp(socket as Socket),
      upgrade: true,
      host: rewrittenHost(tunnel),
    });
    const headers = flow ? flow.requestHeaders(forwarded) : forwarded;
    // A chunked body goes on chunked: Node's parser de-chunked it, Node's client re-chunks it.
    if (req.headers['transfer-encoding'] !== undefined)
      headers.push('Transfer-Encoding', 'chunked');
    new UpgradeExchange(this.context, req, socket, head, {
      tunnel,
      meters,
      headers,
      proxyInfo: proxyInfoOf(socket, proto, false),
      flow,
      onSocketError: destroyOnError,
    }).start();
  }
}

/** The public socket's error listener while the upgrade holds it. */
function destroyOnError(this: Duplex): void {
  this.destroy();
}
