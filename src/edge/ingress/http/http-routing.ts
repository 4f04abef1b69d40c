/**
 * Which tunnel serves an HTTP request on the full path: the one bound to its Host, when it serves
 * HTTP and the connection (a TLS one) was made for that name. One rule for requests, upgrades and
 * the lean relay's choice of what it carries (http-ingress.ts), so that the paths cannot disagree
 * on where a request goes.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { readRequestTarget } from '../../../core/request-target.js';
import { INGRESS_ERRORS, type IngressError } from '../error-pages.js';
import { misdirected } from '../sni-host-match.js';
import type { OnlineTunnel, TunnelRegistry } from '../../registry/tunnel-registry.js';

function servesHttp(tunnel: OnlineTunnel): boolean {
  return tunnel.proto === 'http' || tunnel.proto === 'https';
}

/**
 * The tunnel serving `host` on `socket`, or why none does: no Host, no http tunnel for it, or a
 * TLS connection made for another name.
 * @example lookupHttpTunnel(registry, routingHost(req.headers.host), req.socket)
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

/**
 * Read the target of a request Node's parser read (the full path, requests and upgrades alike) as
 * the lean relay reads its own (core/request-target.ts), before anything routes or judges it:
 * `req.url` becomes the origin-form every later step reads and the agent gets. Returns why the
 * target is refused (answer 400), or undefined.
 * @example const problem = readIncomingTarget(req); if (problem) return refuse(problem);
 */
export function readIncomingTarget(req: IncomingMessage): string | undefined {
  const host = req.headers.host;
  const read = readRequestTarget(req.method ?? 'GET', req.url ?? '', host);
  if ('problem' in read) return read.problem;
  req.url = read.target;
  return undefined;
}
