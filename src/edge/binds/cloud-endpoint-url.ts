/**
 * The URL of a cloud endpoint, parsed: where the edge serves it (a public name, a wildcard, a
 * reserved TCP address, or an internal name) and under which protocol.
 */
import { hostOfHostPort, parseHostPort } from '../../core/host-port.js';
import { hostnameProblem, normalizeName } from '../../core/hostname.js';
import { quote } from '../../core/quote.js';
import { INTERNAL_SUFFIX, type TunnelProto } from '../registry/tunnel-registry.js';
import { BIND_ADDR } from './bind-plan.js';

/** Where a cloud endpoint is served. */
export interface CloudEndpointTarget {
  proto: TunnelProto;
  /** http, https, tls public names (may be `*.x.example.com`). */
  hostname?: string | undefined;
  /** tcp public addresses: `host:port` and the port. */
  addr?: string | undefined;
  port?: number | undefined;
  /** Internal endpoints: `name.internal` or `name.internal:port`. */
  internal?: string | undefined;
  /** The URL as stored: lowercased, no path, no trailing slash. */
  url: string;
}

/**
 * Parse a cloud endpoint URL; a string is the problem, for the API's 400.
 * @example parseCloudEndpointUrl('https://App.example.com/') // { proto: 'https', hostname: 'app.example.com', url: 'https://app.example.com' }
 */
export function parseCloudEndpointUrl(raw: string): CloudEndpointTarget | string {
  const m = /^([a-z]+):\/\/([^/?#]+)\/?$/i.exec(raw.trim());
  if (!m) {
    return `${quote(raw)} is not an endpoint URL: use https://name, http://name, tls://name, tcp://host:port, or https://name.internal (no path)`;
  }
  const scheme = m[1]!.toLowerCase();
  const authority = normalizeName(m[2]!);
  if (!['http', 'https', 'tcp', 'tls'].includes(scheme)) {
    return `the scheme ${quote(scheme)} is not one of http, https, tcp, tls`;
  }
  const proto = scheme as TunnelProto;
  if (proto === 'tcp') {
    const hp = parseHostPort(authority, BIND_ADDR);
    if (!hp) return `a tcp URL needs host:port, e.g. tcp://db.internal:5432, not ${quote(raw)}`;
    const url = `tcp://${hp.host}:${hp.port}`;
    if (hp.host.endsWith(INTERNAL_SUFFIX)) return { proto, internal: `${hp.host}:${hp.port}`, url };
    return { proto, addr: `${hp.host}:${hp.port}`, port: hp.port, url };
  }
  const host = hostOfHostPort(authority);
  const problem = hostnameProblem(host.endsWith(INTERNAL_SUFFIX) ? `${host}.example` : host, true);
  if (problem) return `${quote(host)} is not a valid hostname (${problem})`;
  const url = `${proto}://${host}`;
  if (host.endsWith(INTERNAL_SUFFIX)) {
    if (host.startsWith('*.')) return 'an internal endpoint cannot be a wildcard';
    return { proto, internal: host, url };
  }
  return { proto, hostname: host, url };
}
