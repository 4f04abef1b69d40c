/**
 * Links between the nodes of a cluster. Public traffic may reach node B for a tunnel whose agent
 * is connected to node A; B asks A for a stream to that tunnel over their link and relays the
 * connection through it. A link is one mutual-TLS connection (certificates of the cluster CA,
 * cluster-ca.ts) carrying a muxado session; either node opens streams on it, one per proxied
 * connection, each starting with the request and answer of node-link-wire.ts, or one per query
 * about the peer's own state (node-link-queries.ts: the cluster's traffic inspector). An API-only
 * node only dials: it asks the edge nodes questions and serves no tunnel.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Server, TLSSocket } from 'node:tls';
import { nodeIdProblem } from '../../core/cluster-config.js';
import { formatAddress, parseListenAddress } from '../../core/host-port.js';
import type { Logger } from '../../core/logger.js';
import { MuxSession, type MuxRole } from '../../protocol/muxado/session.js';
import { RefusalLog } from '../listeners/connection-gate.js';
import type { MuxStream } from '../../protocol/muxado/stream.js';
import type { NodeCredentials } from './cluster-ca.js';
import {
  KEEPALIVE_MS,
  acceptedPeer,
  advertisedAddress,
  dialNode,
  nodeLinkServer,
} from './node-link-tls.js';
import { askQuery, type NodeQuery, type QueryHandler } from './node-link-queries.js';
import { answerPeer, askPeer, nodeUnreachable } from './node-link-streams.js';
import { LINK_GREETING, withDeadline, type NodeLinkRequest } from './node-link-wire.js';

export type { NodeLinkRequest } from './node-link-wire.js';

/** Default wait for a dial, and for the peer's answer to a stream request. */
const DEFAULT_NODE_CONNECT_TIMEOUT_MS = 10_000;

export interface NodeLinksOptions {
  nodeId: string;
  credentials: NodeCredentials;
  /**
   * host:port to listen on for other nodes; port 0 = any free port. Undefined: dial only (an
   * API-only node, which asks questions and is asked none); `address` is then ''.
   */
  listen: string | undefined;
  /**
   * host[:port] the other nodes dial to reach this one, when that is not the bound address (a
   * wildcard listen host, NAT); a missing or 0 port means the bound port. `address` reports it.
   */
  advertise?: string | undefined;
  /** Open the local tunnel a peer asks for; reject (ideally with a BurrowError carrying a code) when it is not here. */
  open(request: NodeLinkRequest, peerId: string): Promise<Duplex>;
  /** Answer a peer's query (node-link-queries.ts); absent: every query gets an error reply. */
  answer?: QueryHandler | undefined;
  logger: Logger;
  /**
   * Where the listener's refusals (NODE_LINK_CAPS) are counted and logged; default: logged with
   * `logger`, not counted.
   */
  refusals?: RefusalLog | undefined;
  /** Wait for the peer's answer to a stream request (and for a dial), default 10 s. */
  connectTimeoutMs?: number;
}

/** Another node, as the cluster's membership names it. */
export interface NodePeer {
  id: string;
  /** host:port of its node-link listener. */
  address: string;
}

interface Link {
  peerId: string;
  session: MuxSession;
  socket: TLSSocket;
}

/** A dial under way; `forget` and `close` cancel it (the link it makes is closed at once). */
interface Dial {
  promise: Promise<Link>;
  state: { cancelled: boolean };
}

/**
 * This node's links to the others: a listener for the links they dial, and a dialer for ours.
 * @example
 * const links = await NodeLinks.start({ nodeId, credentials, listen: ':7443', open, logger });
 * const stream = await links.connect({ id: 'edge-a', address: '10.0.0.5:7443' }, { tunnelId, info });
 */
export class NodeLinks {
  /**
   * host:port other nodes dial: `advertise` when given (its port filled in), else `boundAddress`;
   * '' for a node that only dials.
   */
  readonly address: string;
  /** Bound host:port (real port); '' for a node that only dials. */
  readonly boundAddress: string;
  private readonly links = new Map<string, Set<Link>>();
  private readonly dials = new Map<string, Dial>();
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private closing: Promise<void> | undefined;
  /** `options.open`, bound once for every stream a peer opens. */
  private readonly open = (request: NodeLinkRequest, peerId: string): Promise<Duplex> =>
    this.options.open(request, peerId);

  private constructor(
    private readonly options: NodeLinksOptions,
    private readonly server: Server | undefined,
  ) {
    this.logger = options.logger.child({ component: 'node-links', node: options.nodeId });
    this.timeoutMs = options.connectTimeoutMs ?? DEFAULT_NODE_CONNECT_TIMEOUT_MS;
    if (!server) {
      this.boundAddress = this.address = '';
      return;
    }
    const bound = server.address() as AddressInfo;
    this.boundAddress = formatAddress(bound);
    this.address = advertisedAddress(options.advertise, bound.port) ?? this.boundAddress;
    server.on('secureConnection', (socket: TLSSocket) => this.accept(socket));
    // nodeLinkServer closes the socket (enforceHandshakeDeadline); a refused peer is worth a warning.
    server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
      this.logger.warn({ remote: socket.remoteAddress, err: err.message }, 'node link refused');
    });
    server.on('error', (err: Error) => this.logger.error({ err }, 'node link listener failed'));
  }

  /** Listen on `options.listen` for other nodes (when given). */
  static async start(options: NodeLinksOptions): Promise<NodeLinks> {
    const problem = nodeIdProblem(options.nodeId);
    if (problem) throw new TypeError(`node id "${options.nodeId}" ${problem}`);
    if (options.listen === undefined) return new NodeLinks(options, undefined);
    const { host, port } = parseListenAddress(options.listen);
    if (options.advertise && advertisedAddress(options.advertise, 1) === undefined) {
      throw new TypeError(`"${options.advertise}" is not a host[:port] address to advertise`);
    }
    const server = nodeLinkServer(
      options.credentials,
      options.connectTimeoutMs ?? DEFAULT_NODE_CONNECT_TIMEOUT_MS,
      options.refusals ?? new RefusalLog(options.logger, undefined),
    );
    server.listen(port, host === '' ? undefined : host);
    await once(server, 'listening');
    return new NodeLinks(options, server);
  }

  /** Number of open links (for tests and metrics). */
  get linkCount(): number {
    let count = 0;
    for (const set of this.links.values()) count += set.size;
    return count;
  }

  /**
   * A stream to `peer` carrying one proxied connection to its tunnel `request.tunnelId`. Dials the
   * peer when no link exists yet; concurrent callers share one dial. The caller owns the stream
   * (and its 'error' events) once this resolves.
   * @example relay(publicSocket, await links.connect(peer, { tunnelId, info }));
   */
  async connect(peer: NodePeer, request: NodeLinkRequest): Promise<Duplex> {
    const link = this.openLink(peer.id) ?? (await this.dial(peer));
    let stream: MuxStream;
    try {
      stream = link.session.openStream();
    } catch (err) {
      throw nodeUnreachable(peer, 'the link closed', err);
    }
    return askPeer(stream, peer, request, this.timeoutMs);
  }

  /**
   * Ask `peer` one question (node-link-queries.ts) and resolve with its reply's value; dials when
   * no link exists yet. The whole exchange, dial included, is bounded by `timeoutMs`, so a peer
   * that stopped answering costs its caller that long at most.
   * @example const page = await links.ask(peer, { kind: 'traffic.list', limit: 100 }, 2000);
   */
  async ask(peer: NodePeer, query: NodeQuery, timeoutMs: number): Promise<unknown> {
    const deadline = Date.now() + timeoutMs;
    const link =
      this.openLink(peer.id) ??
      (await withDeadline(this.dial(peer), timeoutMs, () =>
        nodeUnreachable(peer, `no link within ${timeoutMs} ms`),
      ));
    let stream: MuxStream;
    try {
      stream = link.session.openStream();
    } catch (err) {
      throw nodeUnreachable(peer, 'the link closed', err);
    }
    return askQuery(stream, peer, query, Math.max(1, deadline - Date.now()));
  }

  /** Close the link to a node that left the cluster. */
  forget(peerId: string): void {
    const dial = this.dials.get(peerId);
    if (dial) {
      dial.state.cancelled = true;
      this.dials.delete(peerId);
    }
    for (const link of this.links.get(peerId) ?? []) link.session.close();
    this.links.delete(peerId);
  }

  /** Stop listening and close every link. */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    for (const dial of this.dials.values()) dial.state.cancelled = true;
    this.dials.clear();
    const server = this.server;
    const closed = server
      ? new Promise<void>((resolve) => server.close(() => resolve()))
      : Promise.resolve();
    const sockets: Promise<unknown>[] = [];
    for (const set of this.links.values()) {
      for (const link of set) {
        if (!link.socket.closed) {
          sockets.push(new Promise((resolve) => link.socket.once('close', resolve)));
        }
        link.session.close();
      }
    }
    this.links.clear();
    await Promise.all([closed, ...sockets]);
  }

  private openLink(peerId: string): Link | undefined {
    for (const link of this.links.get(peerId) ?? []) {
      if (!link.session.closed && !link.session.remoteGoAway) return link;
    }
    return undefined;
  }

  private dial(peer: NodePeer): Promise<Link> {
    if (this.closing) {
      return Promise.reject(nodeUnreachable(peer, 'this node is shutting down'));
    }
    const pending = this.dials.get(peer.id);
    if (pending) return pending.promise;
    const state = { cancelled: false };
    const promise: Promise<Link> = this.dialOnce(peer, state).finally(() => {
      if (this.dials.get(peer.id)?.promise === promise) this.dials.delete(peer.id);
    });
    this.dials.set(peer.id, { promise, state });
    return promise;
  }

  private async dialOnce(peer: NodePeer, state: { cancelled: boolean }): Promise<Link> {
    let socket: TLSSocket;
    try {
      socket = await dialNode(peer, this.options.credentials, this.timeoutMs);
    } catch (err) {
      throw nodeUnreachable(peer, undefined, err);
    }
    if (state.cancelled || this.closing) {
      socket.destroy();
      throw nodeUnreachable(peer, 'the node left the cluster, or this one is shutting down');
    }
    this.logger.info({ peer: peer.id, address: peer.address }, 'node link dialled');
    return this.addLink(peer.id, socket, 'client');
  }

  /** A link a peer dialled: the peer is who its certificate names. */
  private accept(socket: TLSSocket): void {
    const peer = this.closing
      ? { problem: 'shutting down' }
      : acceptedPeer(socket, this.options.nodeId);
    if ('problem' in peer) {
      this.logger.warn({ ...peer, remote: socket.remoteAddress }, 'node link refused');
      socket.destroy();
      return;
    }
    const { peerId } = peer;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    socket.write(LINK_GREETING);
    this.logger.info({ peer: peerId, remote: socket.remoteAddress }, 'node link accepted');
    this.addLink(peerId, socket, 'server');
  }

  private addLink(peerId: string, socket: TLSSocket, role: MuxRole): Link {
    const session = new MuxSession(socket, { role });
    const link: Link = { peerId, session, socket };
    let set = this.links.get(peerId);
    if (!set) this.links.set(peerId, (set = new Set()));
    set.add(link);
    session.on('stream', (stream: MuxStream) => {
      answerPeer(stream, peerId, this.open, this.timeoutMs, this.logger, this.options.answer).catch(
        (err: unknown) => {
          this.logger.error({ peer: peerId, err }, 'node link stream failed');
          stream.destroy();
        },
      );
    });
    session.once('close', (reason: Error | undefined) => {
      const current = this.links.get(peerId);
      current?.delete(link);
      if (current?.size === 0) this.links.delete(peerId);
      this.logger.info({ peer: peerId, reason: reason?.message }, 'node link closed');
    });
    return link;
  }
}
