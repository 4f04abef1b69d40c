/**
 * What the store keeps of each online session and tunnel (src/store/cluster.ts rows), and the
 * stand-ins other nodes put in their registry for them: a RemoteSession whose stop and restart
 * are commands to its node, a RemoteTunnel whose connect() opens a stream over the node link.
 */
import type { Duplex } from 'node:stream';
import type { OnlineSessionRow, OnlineTunnelRow } from '../../store/index.js';
import type {
  OnlineSession,
  OnlineTunnel,
  ProxyInfo,
  TunnelProto,
} from '../registry/tunnel-registry.js';

/** The session fields a row carries (its `data`), beside id, node and credential. */
type SessionData = Pick<
  OnlineSession,
  'ip' | 'metadata' | 'os' | 'agentVersion' | 'transport' | 'startedAt'
> & { region: string };

/** The tunnel fields a row carries: where it is served, what the API shows, its policy. */
interface TunnelData {
  credentialId: string;
  bindId: string;
  proto?: TunnelProto | undefined;
  url?: string | undefined;
  hostname?: string | undefined;
  port?: number | undefined;
  labels?: Record<string, string> | undefined;
  internal?: string | undefined;
  forwardsTo: string;
  metadata: string;
  startedAt: string;
  domainId?: string | undefined;
  addrId?: string | undefined;
  /** The agent's own policy text, as the API shows it. */
  trafficPolicy?: string | undefined;
  /** The policy that runs (the bind options' rules, then the agent's own), compiled where served. */
  policySource?: string | undefined;
  /**
   * Opts.ProxyProto. The holding node's AgentTunnel writes the header; a stand-in needs it only to
   * keep HTTP streams to one public connection (the pools' keys, see TunnelAgent.getName).
   */
  proxyProto?: 1 | 2 | undefined;
  /**
   * Opts.HostHeaderRewrite. The node that receives a request writes its head (with the Host
   * rewritten to `forwardsTo`'s host and port), so every node needs it.
   */
  hostHeaderRewrite?: true | undefined;
  /** ForwardsProto http2: the node that receives a request speaks HTTP/2 over the stream. */
  appProtocol?: 'http2' | undefined;
}

/**
 * Where a tunnel is served, as the store's route_key: one holder per key in the cluster (pooling
 * aside). Labeled tunnels have none: they never conflict.
 * @example routeKeyOf({ hostname: 'app.example.com' }) // 'h:app.example.com'
 */
export function routeKeyOf(t: Pick<OnlineTunnel, 'hostname' | 'port' | 'internal'>): string | null {
  if (t.internal !== undefined) return `i:${t.internal}`;
  if (t.hostname !== undefined) return `h:${t.hostname}`;
  if (t.port !== undefined) return `p:${t.port}`;
  return null;
}

/** The row of one of this node's sessions. */
export function sessionRow(session: OnlineSession, nodeId: string): OnlineSessionRow {
  const data: SessionData = {
    ip: session.ip,
    metadata: session.metadata,
    os: session.os,
    agentVersion: session.agentVersion,
    transport: session.transport,
    startedAt: session.startedAt,
    region: session.region ?? '',
  };
  return {
    id: session.id,
    nodeId,
    credentialId: session.credentialId,
    data: { ...data },
  };
}

/**
 * The row of one of this node's tunnels, with the policy source that runs on it and the policy
 * text the API shows (the tunnel's own, unless given: a bind attaches it after the claim).
 */
export function tunnelRow(
  tunnel: OnlineTunnel,
  nodeId: string,
  credentialId: string,
  policySource: string | undefined,
  trafficPolicy: string | undefined = tunnel.trafficPolicy,
): OnlineTunnelRow {
  const data: TunnelData = {
    credentialId,
    bindId: tunnel.bindId,
    proto: tunnel.proto,
    url: tunnel.url,
    hostname: tunnel.hostname,
    port: tunnel.port,
    labels: tunnel.labels,
    internal: tunnel.internal,
    forwardsTo: tunnel.forwardsTo,
    metadata: tunnel.metadata,
    startedAt: tunnel.startedAt,
    domainId: tunnel.domainId,
    addrId: tunnel.addrId,
    trafficPolicy,
    policySource,
    proxyProto: tunnel.proxyProto,
    hostHeaderRewrite: tunnel.hostHeaderRewrite === true ? true : undefined,
    appProtocol: tunnel.appProtocol,
  };
  return {
    id: tunnel.id,
    sessionId: tunnel.sessionId,
    nodeId,
    routeKey: routeKeyOf(tunnel),
    pooling: tunnel.pooling === true,
    // JSON drops the undefined fields, so rows compare equal when the tunnel did not change.
    data: JSON.parse(JSON.stringify(data)) as Record<string, unknown>,
  };
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function optionalStr(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** What a RemoteSession asks of the node that holds it. */
export type SessionCommand = 'stop' | 'restart' | 'close';

/** Another node's agent session, as this node's registry holds it. */
export class RemoteSession implements OnlineSession {
  readonly id: string;
  readonly node: string;
  readonly credentialId: string;
  readonly ip: string;
  readonly metadata: string;
  readonly os: string;
  readonly agentVersion: string;
  readonly transport: string;
  readonly startedAt: string;
  readonly region: string;

  constructor(
    row: OnlineSessionRow,
    private readonly command: (
      node: string,
      op: SessionCommand,
      sessionId: string,
      reason?: string,
    ) => Promise<void>,
  ) {
    const d = row.data;
    this.id = row.id;
    this.node = row.nodeId;
    this.credentialId = row.credentialId;
    this.ip = str(d.ip);
    this.metadata = str(d.metadata);
    this.os = str(d.os);
    this.agentVersion = str(d.agentVersion);
    this.transport = str(d.transport);
    this.startedAt = str(d.startedAt);
    this.region = str(d.region);
  }

  stop(): Promise<void> {
    return this.command(this.node, 'stop', this.id);
  }

  restart(): Promise<void> {
    return this.command(this.node, 'restart', this.id);
  }

  close(reason: string): void {
    void this.command(this.node, 'close', this.id, reason).catch(() => undefined);
  }
}

/**
 * What a stand-in is made of: a row whose version differs from its stand-in's replaces it.
 * @example tunnelVersion(row) !== remote.version
 */
export function tunnelVersion(row: OnlineTunnelRow): string {
  return JSON.stringify(row.data) + (row.pooling ? '+pool' : '');
}

/** Another node's tunnel: connect() reaches its agent through that node. */
export class RemoteTunnel implements OnlineTunnel {
  readonly id: string;
  readonly sessionId: string;
  readonly node: string;
  readonly credentialId: string;
  readonly bindId: string;
  readonly proto: TunnelProto | undefined;
  readonly url: string | undefined;
  readonly hostname: string | undefined;
  readonly port: number | undefined;
  readonly labels: Record<string, string> | undefined;
  readonly internal: string | undefined;
  readonly pooling: boolean;
  readonly startedAt: string;
  readonly domainId: string | undefined;
  readonly addrId: string | undefined;
  readonly policySource: string | undefined;
  readonly proxyProto: 1 | 2 | undefined;
  readonly hostHeaderRewrite: true | undefined;
  readonly appProtocol: 'http2' | undefined;
  forwardsTo: string;
  metadata: string;
  trafficPolicy: string | undefined;
  policy: OnlineTunnel['policy'];
  /** The row's data as text: a changed row replaces the tunnel. */
  readonly version: string;

  constructor(
    row: OnlineTunnelRow,
    private readonly open: (node: string, tunnelId: string, info: ProxyInfo) => Promise<Duplex>,
  ) {
    const d = row.data as Partial<TunnelData>;
    this.id = row.id;
    this.sessionId = row.sessionId;
    this.node = row.nodeId;
    this.credentialId = str(d.credentialId);
    this.bindId = str(d.bindId) || row.id;
    this.proto = d.proto;
    this.url = optionalStr(d.url);
    this.hostname = optionalStr(d.hostname);
    this.port = typeof d.port === 'number' ? d.port : undefined;
    this.labels = d.labels && typeof d.labels === 'object' ? { ...d.labels } : undefined;
    this.internal = optionalStr(d.internal);
    this.pooling = row.pooling;
    this.startedAt = str(d.startedAt);
    this.domainId = optionalStr(d.domainId);
    this.addrId = optionalStr(d.addrId);
    this.policySource = optionalStr(d.policySource);
    this.forwardsTo = str(d.forwardsTo);
    this.metadata = str(d.metadata);
    this.trafficPolicy = optionalStr(d.trafficPolicy);
    this.proxyProto = d.proxyProto === 1 || d.proxyProto === 2 ? d.proxyProto : undefined;
    this.hostHeaderRewrite = d.hostHeaderRewrite === true ? true : undefined;
    this.appProtocol = d.appProtocol === 'http2' ? 'http2' : undefined;
    this.version = tunnelVersion(row);
  }

  connect(info: ProxyInfo): Promise<Duplex> {
    return this.open(this.node, this.id, info);
  }
}
