/**
 * Host must match SNI on the HTTPS ingress. The TLS handshake chose a certificate (and any TLS
 * rules) for the name in the ClientHello; a request on that connection whose Host names another
 * endpoint would get around them (domain fronting). Such requests are answered 421 Misdirected
 * Request (RFC 9110 §15.5.20), which tells browsers to retry on a connection made for that name.
 *
 * One rule in one file, which docs/security.md names: http/http-routing.ts applies it alike to
 * requests, upgrades and the lean relay's choice of what it carries, so no path can skip it.
 */
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { normalizeName } from '../../core/hostname.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';

/**
 * True when `req` arrived over TLS with an SNI, and the endpoint that SNI names is not `tunnel`,
 * the endpoint its Host (`host`, as routed) routes to. The common case, SNI and Host alike, needs
 * no second lookup. A connection made for a name a wildcard endpoint serves may
 * carry requests for any name that same endpoint serves; a name with an endpoint of its own is
 * another endpoint. Plain HTTP and TLS without SNI (served with the operator's default
 * certificate, routed by Host) are not checked.
 *
 * @example
 * if (misdirected(req.socket, host, tunnel, (name) => registry.byHost(name))) send421();
 */
export function misdirected(
  connection: Duplex,
  host: string,
  tunnel: OnlineTunnel,
  byHost: (name: string) => OnlineTunnel | undefined,
): boolean {
  const socket = connection as Partial<TLSSocket>;
  if (socket.encrypted !== true) return false;
  const sni = socket.servername;
  if (typeof sni !== 'string' || sni === '') return false;
  const name = normalizeName(sni);
  return name !== host && byHost(name) !== tunnel;
}
