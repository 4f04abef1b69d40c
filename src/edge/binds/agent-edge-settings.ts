/**
 * What the agent side of the edge knows about the server: the base domain of random names, the
 * host and port range of TCP endpoints, the public ports of the ingress and the region. From
 * them comes an endpoint's public URL, one function for agents' binds and cloud endpoints.
 */
import type { TunnelProto } from '../registry/tunnel-registry.js';

/** What the agent side of the edge needs to know about the server. */
export interface AgentEdgeSettings {
  /** Base domain of random names (`<10 chars>.<baseDomain>`); any name under it may be bound. */
  baseDomain: string;
  /** Host and port range of TCP endpoints. */
  tcpHost: string;
  tcpPorts: { first: number; last: number };
  /** Public ports of the HTTPS/TLS and HTTP ingress, for URLs (omitted when 443 / 80). */
  httpsPort: number;
  httpPort: number;
  /** Region reported to agents and shown by the API. Default `local`. */
  region?: string | undefined;
}

/**
 * The public URL of an endpoint, agent or cloud: http/https/tls by name (with the ingress port
 * unless it is the scheme's default), tcp by `<tcpHost>:<port>`.
 * @example publicEndpointUrl(settings, 'https', 'app.example.com') // 'https://app.example.com:8443'
 */
export function publicEndpointUrl(
  settings: Pick<AgentEdgeSettings, 'httpsPort' | 'httpPort' | 'tcpHost'>,
  proto: TunnelProto,
  where: string | number,
): string {
  const { httpsPort, httpPort, tcpHost } = settings;
  switch (proto) {
    case 'tcp':
      return `tcp://${tcpHost}:${where}`;
    case 'http':
      return `http://${where}${httpPort === 80 ? '' : `:${httpPort}`}`;
    case 'https':
      return `https://${where}${httpsPort === 443 ? '' : `:${httpsPort}`}`;
    case 'tls':
      return `tls://${where}${httpsPort === 443 ? '' : `:${httpsPort}`}`;
  }
}
