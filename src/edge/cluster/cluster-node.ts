/**
 * One node of a cluster on one PostgreSQL (docs/operations.md "Several nodes"): it records itself
 * with heartbeats, forgets nodes gone quiet, keeps its own online state in the store
 * (OnlinePresence) and other nodes' in its registry (OnlineReplica), carries commands for sessions
 * between nodes, and passes configuration notices (edges, cloud endpoints, credentials,
 * certificates, secrets) to whoever follows them. Traffic for other nodes' tunnels goes over NodeLinks.
 */
import type { Duplex } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { ClusterRepository, StoreNotice, StoreNotifications } from '../../store/index.js';
import { connectTunnel } from '../registry/connect-tunnel.js';
import type { ProxyInfo, TunnelRegistry } from '../registry/tunnel-registry.js';
import type { NodeQuery, QueryHandler } from './node-link-queries.js';
import type { NodeLinkRequest, NodeLinks, NodePeer } from './node-links.js';
import { OnlinePresence } from './online-presence.js';
import { OnlineReplica } from './online-replica.js';
import type { SessionCommand } from './online-rows.js';

/** Configuration topics a node may follow; each is announced after a write through the API. */
export type ClusterTopic =
  'edges' | 'cloud_endpoints' | 'credentials' | 'certificates' | 'secrets' | 'events';

const ONLINE_TOPIC = 'online';
/** Heartbeats between two full reloads of the cluster's online state. */
const RELOAD_EVERY_BEATS = 5;
const COMMAND_TOPIC = 'command';

export interface ClusterNodeOptions {
  nodeId: string;
  role: 'all' | 'api' | 'edge';
  cluster: ClusterRepository;
  notifications: StoreNotifications;
  registry: TunnelRegistry;
  logger: Logger;
  /**
   * The links to other nodes: edge roles route traffic over them; an API-only node's only dial,
   * to ask the edge nodes questions (their traffic inspectors).
   */
  links?: NodeLinks | undefined;
  /** How often the heartbeat is written (ms). */
  heartbeatMs: number;
  /** A node whose heartbeat is older than this is gone: its rows are cleared (ms). */
  timeoutMs: number;
}

interface CommandNotice {
  to: string;
  op: SessionCommand;
  session: string;
  reason?: string;
}

function isCommand(data: unknown): data is CommandNotice {
  const d = data as Partial<CommandNotice> | null;
  return (
    typeof d?.to === 'string' &&
    typeof d.session === 'string' &&
    (d.op === 'stop' || d.op === 'restart' || d.op === 'close')
  );
}

/**
 * @example
 * const node = new ClusterNode({ nodeId, role: 'all', cluster: repos.cluster, notifications, registry, logger, links, heartbeatMs: 1000, timeoutMs: 5000 });
 * await node.start();
 * node.follow('edges', () => edges.sync());
 */
export class ClusterNode {
  readonly presence: OnlinePresence;
  readonly replica: OnlineReplica;
  private readonly followers = new Map<string, ((data: unknown) => unknown)[]>();
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private readonly startedAt = new Date().toISOString();
  private beatsSinceReload = 0;
  /** When this node last wrote its heartbeat (ms since the epoch). */
  private lastBeat = 0;
  /** Link addresses of the nodes that have one, by node id. */
  private peers = new Map<string, string>();
  /** Every node in the cluster's table, API-only ones too: who may ask this one questions. */
  private members = new Set<string>();
  /** Who answers peers' queries here, by the query kind's first part (`traffic.list`: traffic). */
  private readonly answerers = new Map<string, QueryHandler>();
  private closed = false;

  constructor(private readonly options: ClusterNodeOptions) {
    const { nodeId, cluster, registry, logger } = options;
    this.replica = new OnlineReplica({
      nodeId,
      cluster,
      registry,
      logger,
      open: (node, tunnelId, info) => this.openRemote(node, tunnelId, info),
      command: (node, op, sessionId, reason) => this.command(node, op, sessionId, reason),
    });
    this.presence = new OnlinePresence({
      nodeId,
      cluster,
      registry,
      logger,
      changed: () => this.announce(ONLINE_TOPIC),
      evict: (node, sessionId) =>
        void this.command(node, 'close', sessionId, 'the agent resumed on another node').catch(
          () => undefined,
        ),
      forgetRoute: (tunnel) => this.replica.forgetRoute(tunnel),
    });
  }

  get id(): string {
    return this.options.nodeId;
  }

  /** The live state this node serves and lists: its own agents and other nodes' stand-ins. */
  get registry(): TunnelRegistry {
    return this.options.registry;
  }

  /** Register, load the cluster's online state, and follow notices and heartbeats. */
  async start(): Promise<void> {
    const { notifications, nodeId, role, links } = this.options;
    await this.register();
    this.lastBeat = Date.now();
    notifications.on('notice', this.onNotice);
    notifications.on('resync', this.onResync);
    if (role !== 'api') this.presence.start();
    await this.loadPeers();
    await this.replica.resync();
    this.timer = setInterval(() => void this.beat(), this.options.heartbeatMs);
    this.timer.unref();
    this.options.logger.info({ node: nodeId, role, link: links?.address }, 'cluster node joined');
  }

  /**
   * Run `handler` when another node announces a change of `topic`, with the notice's data (which
   * may name what changed), and with undefined after a reconnect (notices may have been lost:
   * reload everything).
   */
  follow(topic: ClusterTopic, handler: (data: unknown) => unknown): void {
    const list = this.followers.get(topic) ?? [];
    list.push(handler);
    this.followers.set(topic, list);
  }

  /** Tell every node that `topic` changed (a write through this node's API). */
  announce(topic: string, data?: unknown): void {
    if (this.closed) return;
    this.options.notifications
      .notify(topic, data)
      .catch((err: unknown) =>
        this.options.logger.warn(
          { topic, err: err instanceof Error ? err.message : String(err) },
          'could not notify the other nodes; they catch up on their next reload',
        ),
      );
  }

  /** The link server's answer to a peer: a stream to one of this node's own tunnels. */
  async openLocal(request: NodeLinkRequest, peerId: string): Promise<Duplex> {
    // A certificate of the cluster's CA is not enough: a node that left (or a leaf minted from a
    // copy of the CA) is not a member any more.
    await this.requireMember(peerId, () => this.peers);
    const tunnel = this.options.registry.tunnel(request.tunnelId);
    if (!tunnel || tunnel.node !== undefined) {
      throw new BurrowError(
        CODES.tunnelNotFound,
        404,
        `tunnel ${request.tunnelId} is not online on node ${this.options.nodeId}`,
      );
    }
    return connectTunnel(tunnel, request.info);
  }

  /**
   * Answer peers' queries whose kind is `area` or starts with `area.` with `handler`.
   * @example node.serve('traffic', (query) => answerTrafficQuery(inspector, query));
   */
  serve(area: string, handler: QueryHandler): void {
    this.answerers.set(area, handler);
  }

  /** The link server's answer to a peer's query: from a member, to whoever serves its area. */
  async answerQuery(query: NodeQuery, peerId: string): Promise<unknown> {
    await this.requireMember(peerId, () => this.members);
    const handler = this.answerers.get(query.kind.split('.')[0]!);
    if (!handler) {
      throw new BurrowError(
        CODES.nodeLinkProtocol,
        501,
        `node ${this.options.nodeId} answers no ${query.kind} query; run the same Burrow version on every node`,
      );
    }
    return handler(query, peerId);
  }

  /**
   * The other nodes that have a node link (the edge nodes), as of the last heartbeat: those a
   * question about the whole cluster goes to.
   */
  linkedPeers(): NodePeer[] {
    return [...this.peers]
      .filter(([id]) => id !== this.options.nodeId)
      .map(([id, address]) => ({ id, address }));
  }

  /**
   * Ask `peer` one question over the node links, within `timeoutMs` (dial included).
   * @example await node.ask({ id: 'edge-b', address: '10.0.0.6:7443' }, { kind: 'traffic.get', id: 'tr_1' }, 2000);
   */
  ask(peer: NodePeer, query: NodeQuery, timeoutMs: number): Promise<unknown> {
    const links = this.options.links;
    if (!links) {
      return Promise.reject(
        new BurrowError(CODES.tunnelUnreachable, 502, 'this node has no node links to ask over'),
      );
    }
    return links.ask(peer, query, timeoutMs);
  }

  /** Leave: stop beating, drop our rows (other nodes forget us at once), forget stand-ins. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.beating;
    const { notifications, cluster, nodeId, logger } = this.options;
    notifications.off('notice', this.onNotice);
    notifications.off('resync', this.onResync);
    this.presence.close();
    this.replica.close();
    await this.presence.settled();
    try {
      await cluster.unregister(nodeId);
      await notifications.notify(ONLINE_TOPIC);
    } catch (err) {
      // The others clear our rows when our heartbeat lapses.
      logger.warn({ err: (err as Error).message }, 'could not leave the cluster cleanly');
    }
  }

  private async openRemote(node: string, tunnelId: string, info: ProxyInfo): Promise<Duplex> {
    const links = this.options.links;
    // Known from the last heartbeat; a node that joined since is looked up once.
    if (!this.peers.has(node)) await this.loadPeers();
    const address = this.peers.get(node);
    if (!links || !address) {
      throw new BurrowError(
        CODES.tunnelUnreachable,
        502,
        `tunnel ${tunnelId} is on node ${node}, which this node cannot reach`,
      );
    }
    return links.connect({ id: node, address }, { tunnelId, info });
  }

  /** Record this node (again, after it was taken for gone) with a fresh heartbeat. */
  private register(): Promise<void> {
    const { cluster, nodeId, role, links } = this.options;
    return cluster.register({
      id: nodeId,
      role,
      linkAddress: links?.address ?? '',
      startedAt: this.startedAt,
    });
  }

  /**
   * Reject `peerId` unless it is in `among()` (peers with a link, or every member), reloading the
   * table once first: a node that joined since the last heartbeat is known at once.
   */
  private async requireMember(
    peerId: string,
    among: () => ReadonlyMap<string, unknown> | ReadonlySet<string>,
  ): Promise<void> {
    if (!among().has(peerId)) await this.loadPeers();
    if (!among().has(peerId)) {
      throw new BurrowError(
        CODES.nodeLinkProtocol,
        403,
        `node ${peerId} is not a member of this cluster now`,
      );
    }
  }

  private async loadPeers(): Promise<void> {
    const nodes = await this.options.cluster.nodes();
    this.members = new Set(nodes.map((n) => n.id));
    this.peers = new Map(
      nodes.filter((n) => n.linkAddress !== '').map((n) => [n.id, n.linkAddress]),
    );
  }

  private async command(
    node: string,
    op: SessionCommand,
    sessionId: string,
    reason?: string,
  ): Promise<void> {
    const notice: CommandNotice = {
      to: node,
      op,
      session: sessionId,
      ...(reason ? { reason } : {}),
    };
    await this.options.notifications.notify(COMMAND_TOPIC, notice);
  }

  private beat(): Promise<void> {
    this.beating ??= this.beatOnce().finally(() => (this.beating = undefined));
    return this.beating;
  }

  private async beatOnce(): Promise<void> {
    const { cluster, nodeId, role, links, logger, timeoutMs } = this.options;
    try {
      if (!(await cluster.heartbeat(nodeId))) {
        logger.warn('this node was taken for gone (paused or cut off): joining again');
        await this.register();
        this.presence.dirty = true;
      }
      if (this.presence.dirty) await this.presence.republish();
      // Only a node that could beat all along judges others: after the store was away, every
      // node's last beat is old, and the first one back must not clear the rest.
      const steady = Date.now() - this.lastBeat < timeoutMs / 2;
      this.lastBeat = Date.now();
      const gone = steady ? await cluster.reapLapsed(timeoutMs) : [];
      for (const id of gone) {
        logger.warn({ node: id }, 'node stopped beating: its sessions and tunnels are cleared');
        links?.forget(id);
      }
      if (gone.length > 0) this.announce(ONLINE_TOPIC);
      await this.loadPeers();
      // Notices carry every change; the full reload is the safety net for a missed one, so it
      // runs every few seconds rather than on every beat (it reads every online row).
      if (gone.length > 0 || ++this.beatsSinceReload >= RELOAD_EVERY_BEATS) {
        this.beatsSinceReload = 0;
        await this.replica.resync();
      }
    } catch (err) {
      if (role !== 'api') this.presence.dirty = true;
      logger.warn({ err: (err as Error).message }, 'cluster heartbeat failed; retrying');
    }
  }

  private readonly onNotice = (notice: StoreNotice): void => {
    if (notice.from === this.options.nodeId) return;
    if (notice.topic === ONLINE_TOPIC) {
      this.replica.resync().catch((err: unknown) => this.reloadFailed(ONLINE_TOPIC, err));
      return;
    }
    if (notice.topic === COMMAND_TOPIC) {
      if (isCommand(notice.data) && notice.data.to === this.options.nodeId) this.run(notice.data);
      return;
    }
    this.notify(notice.topic, notice.data);
  };

  private readonly onResync = (): void => {
    this.replica.resync().catch((err: unknown) => this.reloadFailed(ONLINE_TOPIC, err));
    for (const topic of this.followers.keys()) this.notify(topic, undefined);
  };

  private notify(topic: string, data: unknown): void {
    for (const handler of this.followers.get(topic) ?? []) {
      Promise.resolve()
        .then(() => handler(data))
        .catch((err: unknown) => this.reloadFailed(topic, err));
    }
  }

  private run(command: CommandNotice): void {
    const session = this.options.registry.session(command.session);
    if (!session || session.node !== undefined) return;
    this.options.logger.info(
      { session: session.id, op: command.op },
      'session command from another node',
    );
    const done =
      command.op === 'stop'
        ? session.stop()
        : command.op === 'restart'
          ? session.restart()
          : Promise.resolve(session.close(command.reason ?? 'closed by another node'));
    done.catch((err: unknown) => this.reloadFailed(COMMAND_TOPIC, err));
  }

  private reloadFailed(topic: string, err: unknown): void {
    this.options.logger.warn(
      { topic, err: err instanceof Error ? err.message : String(err) },
      'cluster notice could not be applied; the next reload retries',
    );
  }
}
