/**
 * The named tunnels of one agent session (`burrow http|tcp|tls`, `burrow start`), as ngrok's
 * agent API shows and changes them: `GET /api/tunnels`, `POST /api/tunnels`,
 * `DELETE /api/tunnels/{name}`. Each http tunnel with `inspect` (the default) captures its
 * requests into the agent's {@link RequestLog}; each tunnel counts its connections and requests.
 */
import type { Endpoint } from '../sdk/endpoints.js';
import { describeConnectError, CLI_HINTS } from '../sdk/connect-errors.js';
import type { Session } from '../sdk/session.js';
import { AgentApiError } from './errors.js';
import { CAPTURE_BYTES, Meter, type MeterView, type RequestLog } from './request-log.js';
import type { TunnelDefinition } from './tunnel-definition.js';

/** A tunnel as `GET /api/tunnels/{name}` shows it (ngrok's shape). */
export interface TunnelView {
  name: string;
  ID: string;
  uri: string;
  public_url: string;
  proto: string;
  config: { addr: string; inspect: boolean; [option: string]: unknown };
  metrics: { conns: MeterView; http: MeterView };
}

/** A version 3 endpoint as `GET /api/endpoints` shows it. */
export interface EndpointView {
  name: string;
  id: string;
  uri: string;
  url: string;
  upstream: { url: string; protocol: string };
  traffic_policy: string;
  pooling_enabled: boolean;
  metadata: string;
  metrics: { conns: MeterView; http: MeterView };
}

/** One running tunnel. */
export interface RunningTunnel {
  definition: TunnelDefinition;
  endpoint: Endpoint;
  conns: Meter;
  http: Meter;
}

/**
 * The definition of an endpoint opened elsewhere and adopted ({@link NamedTunnels.adopt}): the
 * quick tunnel of `burrow http`, a device agent's tunnel. Its name, protocol and local address,
 * with `changes`; every other key at its default (inspected, no options of its own).
 * @example adoptedDefinition('command_line', 'http', '3000')
 */
export function adoptedDefinition(
  name: string,
  proto: TunnelDefinition['proto'],
  addr: string,
  changes: Partial<Pick<TunnelDefinition, 'domain' | 'labels' | 'url'>> = {},
): TunnelDefinition {
  return {
    name,
    kind: 'tunnel',
    proto,
    addr,
    domain: undefined,
    remoteAddr: undefined,
    scheme: undefined,
    hostHeaderRewrite: false,
    appProtocol: undefined,
    labels: undefined,
    trafficPolicy: undefined,
    poolingEnabled: false,
    inspect: true,
    metadata: '',
    url: undefined,
    options: undefined,
    ...changes,
  };
}

/** Open the endpoint a definition describes on `session`. */
export async function openDefinition(session: Session, d: TunnelDefinition): Promise<Endpoint> {
  const common = { forward: d.addr, metadata: d.metadata, poolingEnabled: d.poolingEnabled };
  const appProtocol = d.appProtocol;
  switch (d.proto) {
    case 'labeled':
      return session.labeledTunnel({
        labels: d.labels ?? {},
        forward: d.addr,
        metadata: d.metadata,
        appProtocol,
      });
    case 'http':
      return session.httpEndpoint({
        ...common,
        domain: d.domain,
        scheme: d.scheme,
        trafficPolicy: d.trafficPolicy,
        hostHeaderRewrite: d.hostHeaderRewrite,
        appProtocol,
      });
    case 'tcp':
      return session.tcpEndpoint({ ...common, addr: d.remoteAddr, trafficPolicy: d.trafficPolicy });
    case 'tls':
      return session.tlsEndpoint({ ...common, domain: d.domain, trafficPolicy: d.trafficPolicy });
  }
}

/**
 * The tunnels of one session by name.
 * @example const tunnels = new NamedTunnels(session, log); await tunnels.start(definition);
 */
export class NamedTunnels {
  private readonly running = new Map<string, RunningTunnel>();

  /**
   * `session` is the session, or how to find the current one (the device agent's changes as it
   * reconnects). With `readOnly`, the tunnels are made elsewhere (the device agent's `/tunnels`
   * API): starting and stopping them here is a 405 carrying that message.
   */
  constructor(
    private readonly session: Session | (() => Session | undefined),
    private readonly log: RequestLog,
    private readonly readOnly?: string,
  ) {}

  /** The session now (undefined while the device agent has none), for the status page. */
  get sessionInfo(): Session | undefined {
    return typeof this.session === 'function' ? this.session() : this.session;
  }

  private changeable(): Session {
    if (this.readOnly !== undefined) throw new AgentApiError(405, this.readOnly);
    const session = this.sessionInfo;
    if (!session)
      throw new AgentApiError(503, 'the agent is not connected to its server yet; try again');
    return session;
  }

  /**
   * Bind `definition` and keep it by its name; a name already running is a 409, a bind the server
   * refuses a 502 with the server's words.
   */
  async start(definition: TunnelDefinition): Promise<RunningTunnel> {
    const session = this.changeable();
    if (this.running.has(definition.name)) {
      throw new AgentApiError(
        409,
        `a tunnel named '${definition.name}' is already running; stop it first (DELETE /api/tunnels/${encodeURIComponent(definition.name)})`,
        { field: 'name' },
      );
    }
    let endpoint: Endpoint;
    try {
      endpoint = await openDefinition(session, definition);
    } catch (err) {
      throw new AgentApiError(
        502,
        `the server refused the tunnel '${definition.name}': ${describeConnectError(err, CLI_HINTS)}`,
        {
          code: (err as { code?: string }).code,
        },
      );
    }
    return this.adopt(definition, endpoint);
  }

  /** Keep an endpoint opened elsewhere (the quick tunnel of `burrow http`) under `definition.name`. */
  adopt(definition: TunnelDefinition, endpoint: Endpoint): RunningTunnel {
    const tunnel: RunningTunnel = { definition, endpoint, conns: new Meter(), http: new Meter() };
    this.running.set(definition.name, tunnel);
    endpoint.on('connection', () => tunnel.conns.record(0));
    if (definition.proto === 'http' || definition.proto === 'labeled') {
      if (definition.inspect) endpoint.capture(CAPTURE_BYTES);
      endpoint.on('request', (exchange) => {
        tunnel.http.record(exchange.durationMs);
        if (definition.inspect) this.log.add(definition.name, exchange);
      });
    }
    endpoint.once('close', () => {
      if (this.running.get(definition.name) === tunnel) this.running.delete(definition.name);
    });
    return tunnel;
  }

  /** Unbind the tunnel `name`; a name not running is a 404. */
  async stop(name: string): Promise<void> {
    this.changeable();
    const tunnel = this.get(name);
    this.running.delete(name);
    await tunnel.endpoint.close();
  }

  /** The tunnel `name`, or a 404 that lists the names there are. */
  get(name: string): RunningTunnel {
    const tunnel = this.running.get(name);
    if (!tunnel) {
      const names = [...this.running.keys()];
      throw new AgentApiError(
        404,
        `tunnel '${name}' not found${names.length > 0 ? `; the tunnels are ${names.join(', ')}` : '; no tunnel is running'}`,
      );
    }
    return tunnel;
  }

  list(): RunningTunnel[] {
    return [...this.running.values()];
  }

  /** Stop every tunnel (best effort). */
  async closeAll(): Promise<void> {
    await Promise.all(this.list().map((t) => t.endpoint.close().catch(() => undefined)));
    this.running.clear();
  }
}

/** A running tunnel in ngrok's `/api/tunnels` shape. */
export function tunnelView(t: RunningTunnel): TunnelView {
  const d = t.definition;
  const labels = Object.entries(t.endpoint.labels ?? {}).map(([k, v]) => `${k}=${v}`);
  const publicUrl = t.endpoint.url ?? `labels:${labels.join(',')}`;
  const proto = t.endpoint.url ? new URL(t.endpoint.url).protocol.replace(':', '') : 'labeled';
  const options = d.options ?? {};
  return {
    name: d.name,
    ID: t.endpoint.id,
    uri: `/api/tunnels/${encodeURIComponent(d.name)}`,
    public_url: publicUrl,
    proto,
    config: {
      addr: t.endpoint.forwardsTo,
      inspect: d.inspect && (d.proto === 'http' || d.proto === 'labeled'),
      ...options,
      ...(d.labels && { labels }),
    },
    metrics: { conns: t.conns.view(), http: t.http.view() },
  };
}

/** A running endpoint in `/api/endpoints` shape. */
export function endpointView(t: RunningTunnel): EndpointView {
  const d = t.definition;
  return {
    name: d.name,
    id: t.endpoint.id,
    uri: `/api/endpoints/${encodeURIComponent(d.name)}`,
    url: t.endpoint.url ?? '',
    upstream: { url: d.addr, protocol: 'http1' },
    traffic_policy: d.trafficPolicy ?? '',
    pooling_enabled: d.poolingEnabled,
    metadata: d.metadata,
    metrics: { conns: t.conns.view(), http: t.http.view() },
  };
}
