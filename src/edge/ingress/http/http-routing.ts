/**
 * Which tunnel serves an HTTP request: the one bound to its Host, when it serves HTTP and the
 * connection (a TLS one) was made for that name. One rule for requests and upgrades on either
 * wire (http-ingress.ts leanRoute).
 */
import type { Duplex } from 'node:stream';
import { INGRESS_ERRORS, type IngressError } from '../error-pages.js';
import { misdirected } from '../sni-host-match.js';
import type { OnlineTunnel, TunnelRegistry } from '../../registry/tunnel-registry.js';

function servesHttp(tunnel: OnlineTunnel): boolean {
  return tunnel.proto === 'http' || tunnel.proto === 'https';
}

/**
 * The tunnel serving `host` on `socket`, or why none does: no Host, no http tunnel for it, or a
 * TLS connection made for another name.
 * @example lookupHttpTunnel(registry, routingHost(head.host), socket)
 */
export function lookupHttpTunnel(
  registry: TunnelRegistry,
  host: string | undefined,
  socket: Duplex,
): OnlineTunnel | IngressError {
  if (host === undefined) return INGRESS_ERRORS.missingHost;
  const tunnel = registry.byHost(host);
  if (!tunnel || !servesHttp(tunnel)) return INGRESS_ERRORS.tunnelNotFound;
  const byHost = (name: string): OnlineTunnel | undefined => registry.byHost(name);
  return misdirected(socket, host, tunnel, byHost) ? INGRESS_ERRORS.misdirected : tunnel;
}
