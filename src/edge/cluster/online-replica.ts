/**
 * Other nodes' sessions and tunnels in this node's registry, as stand-ins (RemoteSession,
 * RemoteTunnel) loaded from the store: so the ingress routes to them, edges balance over them,
 * bind planning avoids their names, and the API lists them, all with the code that serves this
 * node's own. Reloaded when a node announces a change (LISTEN/NOTIFY) and every fifth heartbeat, so
 * a missed notice heals itself.
 */
import type { Duplex } from 'node:stream';
import { coalesced } from '../../core/coalesced.js';
import type { Logger } from '../../core/logger.js';
import type { ClusterRepository } from '../../store/index.js';
import { compileBindPolicy } from '../binds/bind-traffic-policy.js';
import type { EndpointPolicies } from '../binds/endpoint-policy.js';
import {
  TunnelConflictError,
  type OnlineTunnel,
  type ProxyInfo,
  type TunnelRegistry,
} from '../registry/tunnel-registry.js';
import {
  RemoteSession,
  RemoteTunnel,
  routeKeyOf,
  tunnelVersion,
  type SessionCommand,
} from './online-rows.js';

export interface OnlineReplicaOptions {
  nodeId: string;
  cluster: ClusterRepository;
  registry: TunnelRegistry;
  logger: Logger;
  /** Open a proxied connection to `tunnelId` on `node` (the node link). */
  open: (node: string, tunnelId: string, info: ProxyInfo) => Promise<Duplex>;
  /** Ask `node` to stop, restart or close one of its sessions. */
  command: (node: string, op: SessionCommand, sessionId: string, reason?: string) => Promise<void>;
}

/**
 * @example
 * const replica = new OnlineReplica({ nodeId, cluster, registry, logger, open, command });
 * replica.policies = agents.policies; // edge nodes: other nodes' tunnels run their policy here
 * await replica.resync();
 */
export class OnlineReplica {
  /**
   * Where other nodes' tunnels get their policy. Without it (an API-only node, which serves no
   * traffic) they are listed but carry none.
   */
  policies: EndpointPolicies | undefined;
  private readonly sessions = new Map<string, RemoteSession>();
  private readonly tunnels = new Map<string, RemoteTunnel>();
  private closed = false;

  constructor(private readonly options: OnlineReplicaOptions) {}

  /** Stand-ins held now (tests, metrics). */
  get size(): { sessions: number; tunnels: number } {
    return { sessions: this.sessions.size, tunnels: this.tunnels.size };
  }

  /**
   * Load the store's view now. Calls made during a load fold into one more load after it, so a
   * notice is never missed and a burst of notices costs two queries, not one each.
   */
  readonly resync: () => Promise<void> = coalesced(() => this.loadOnce(), {
    stop: () => this.closed,
  });

  /**
   * Drop stand-ins at `tunnel`'s name or port: the store just gave it to this node's bind, so
   * whatever the replica still shows there is stale.
   */
  forgetRoute(tunnel: OnlineTunnel): void {
    const key = routeKeyOf(tunnel);
    if (key === null) return;
    for (const remote of [...this.tunnels.values()]) {
      if (routeKeyOf(remote) !== key || (remote.pooling && tunnel.pooling === true)) continue;
      this.removeTunnel(remote);
    }
  }

  /** Forget every stand-in (this node leaves the cluster). */
  close(): void {
    this.closed = true;
    for (const t of [...this.tunnels.values()]) this.removeTunnel(t);
    for (const s of [...this.sessions.values()]) this.removeSession(s);
  }

  private async loadOnce(): Promise<void> {
    const { cluster, nodeId } = this.options;
    const online = await cluster.online({ exceptNode: nodeId });
    if (this.closed) return;
    const sessionRows = new Map(online.sessions.map((r) => [r.id, r]));
    const tunnelRows = new Map(online.tunnels.map((r) => [r.id, r]));
    // Gone or changed first, so a name that moved between tunnels is free when its new holder comes.
    for (const t of [...this.tunnels.values()]) {
      const row = tunnelRows.get(t.id);
      if (!row || tunnelVersion(row) !== t.version) {
        this.removeTunnel(t);
      }
    }
    for (const s of [...this.sessions.values()]) {
      if (!sessionRows.has(s.id)) this.removeSession(s);
    }
    for (const row of online.sessions) {
      if (this.sessions.has(row.id)) continue;
      const session = new RemoteSession(row, this.options.command);
      this.sessions.set(row.id, session);
      this.options.registry.addSession(session);
    }
    for (const row of online.tunnels) {
      if (this.tunnels.has(row.id) || !this.sessions.has(row.sessionId)) continue;
      this.addTunnel(new RemoteTunnel(row, this.options.open));
    }
  }

  private addTunnel(tunnel: RemoteTunnel): void {
    const { registry, logger } = this.options;
    // Compiled before it is added: a tunnel that cannot run its policy here is not served here.
    let compiled;
    try {
      compiled =
        tunnel.policySource !== undefined && tunnel.proto && this.policies
          ? compileBindPolicy(tunnel.policySource, tunnel.proto, 'TrafficPolicy')
          : undefined;
    } catch (err) {
      logger.error(
        { tunnel: tunnel.id, node: tunnel.node, err: (err as Error).message },
        "another node's tunnel has a policy this node cannot run: not serving it here",
      );
      return;
    }
    try {
      registry.addTunnel(tunnel);
    } catch (err) {
      if (!(err instanceof TunnelConflictError)) throw err;
      // A bind of ours raced the other node's; the store's claim decides, the next load agrees.
      logger.debug({ tunnel: tunnel.id, holder: err.holder.id }, 'stand-in conflicts: skipped');
      return;
    }
    this.tunnels.set(tunnel.id, tunnel);
    if (compiled && this.policies) {
      // Same tick as addTunnel: no connection reaches the stand-in before its policy is on.
      this.policies.attach(
        tunnel,
        { text: tunnel.trafficPolicy ?? '', policy: compiled },
        tunnel.credentialId,
      );
    }
  }

  private removeTunnel(tunnel: RemoteTunnel): void {
    this.tunnels.delete(tunnel.id);
    if (this.options.registry.tunnel(tunnel.id) === tunnel) {
      this.options.registry.removeTunnel(tunnel.id);
    }
  }

  private removeSession(session: RemoteSession): void {
    this.sessions.delete(session.id);
    for (const t of [...this.tunnels.values()]) {
      if (t.sessionId === session.id) this.removeTunnel(t);
    }
    if (this.options.registry.session(session.id) === session) {
      this.options.registry.removeSession(session.id);
    }
  }
}
