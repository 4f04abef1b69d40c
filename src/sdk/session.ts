import { EventEmitter } from 'node:events';
import { WakeableSleep } from '../core/wakeable-sleep.js';
import { type MuxSession, StreamType, call } from '../protocol/index.js';
import {
  Endpoint,
  endpointSpec,
  type EndpointHost,
  type EndpointProto,
  type HttpEndpointOptions,
  type LabeledTunnelOptions,
  type TcpEndpointOptions,
  type TlsEndpointOptions,
} from './endpoints.js';
import { BurrowAgentError, toAgentError } from './errors.js';
import { createForwarder } from './forward.js';
import { openLink, type Link, type SessionIdentity } from './link.js';
import {
  backoffDelay,
  resolveConnectOptions,
  RPC_TIMEOUT_MS,
  STABLE_AFTER_MS,
  type ConnectOptions,
  type SessionSettings,
} from './options.js';
import type { ServerStreamHost } from './server-streams.js';

/** Events of a Session. */
export interface SessionEvents {
  /** Connected and authenticated, every endpoint bound (again); `resumed` after a reconnect. */
  connected: [info: { clientId: string; resumed: boolean }];
  /** The connection was lost (a reconnect follows unless the session is closing). */
  disconnected: [reason: Error | undefined];
  /** About to try again, after `delayMs`. */
  reconnecting: [info: { attempt: number; delayMs: number }];
  /** A failure that did not end the session: a reconnect attempt, a re-bind. Carries the server's code. */
  error: [error: BurrowAgentError];
  /** A heartbeat answer arrived; the round-trip time in milliseconds. */
  heartbeat: [latencyMs: number];
  /** The server asked the agent to stop (the session closes) or restart (it reconnects). */
  stop: [];
  restart: [];
  /** The session is closed for good. */
  close: [];
}

/**
 * Connect to a Burrow edge and authenticate. The first connection must succeed (a bad token or
 * address rejects at once with a BurrowAgentError); after that the session reconnects by itself
 * and resumes, binding every endpoint again on the same URL.
 *
 * @example
 * import { connect } from 'burrow/sdk';
 * const session = await connect({ serverAddr: '127.0.0.1:4443', authtoken: process.env.BURROW_AUTHTOKEN!, ca: './burrow-data/ca.pem' });
 * const endpoint = await session.httpEndpoint({ forward: 'localhost:3000' });
 * console.log(`online at ${endpoint.url}`);
 */
export async function connect(options: ConnectOptions): Promise<Session> {
  const session = new Session(resolveConnectOptions(options));
  await session.start();
  return session;
}

/**
 * A connection to the edge that holds endpoints. Create one with connect().
 *
 * @example
 * session.on('reconnecting', ({ attempt, delayMs }) => console.log(`reconnecting (#${attempt}) in ${delayMs} ms`));
 * session.on('error', (err) => console.error(err.code, err.message));
 * const api = await session.httpEndpoint({ domain: 'api.example.com', forward: 8080 });
 * const ssh = await session.tcpEndpoint({ forward: 22 });
 * await session.close();
 */
export class Session extends EventEmitter<SessionEvents> implements EndpointHost, ServerStreamHost {
  private link: Link | undefined;
  private identity: SessionIdentity = { clientId: '', cookie: '' };
  private readonly endpointSet = new Set<Endpoint>();
  private readonly byId = new Map<string, Endpoint>();
  private readonly pendingBinds = new Set<Promise<unknown>>();
  private closing = false;
  private failures = 0;
  private immediate = false;
  private readonly pause = new WakeableSleep();
  private readonly retryTimers = new Set<NodeJS.Timeout>();

  /** @internal Use connect(). */
  constructor(private readonly settings: SessionSettings) {
    super();
  }

  /** The server's id for this session (kept across reconnects when resumption works). */
  get clientId(): string {
    return this.identity.clientId;
  }

  /** The `serverAddr` this session connects to. */
  get serverAddr(): string {
    return this.settings.serverAddr;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  get closed(): boolean {
    return this.closing;
  }

  /** Round-trip time of the last heartbeat, in milliseconds. */
  get latency(): number | undefined {
    return this.link?.heartbeat.latency;
  }

  /** The endpoints of this session that are not closed. */
  get endpoints(): Endpoint[] {
    return [...this.endpointSet];
  }

  get connectTimeoutMs(): number {
    return this.settings.connectTimeout;
  }

  /**
   * Bind an HTTP endpoint (https by default; plain HTTP is served on the edge's HTTP port too).
   * @example const ep = await session.httpEndpoint({ domain: 'app.example.com', forward: 'localhost:3000' });
   */
  httpEndpoint(options: HttpEndpointOptions = {}): Promise<Endpoint> {
    return this.open(options.scheme ?? 'https', options);
  }

  /**
   * Bind a TCP endpoint on a reserved address or a random port.
   * @example const ep = await session.tcpEndpoint({ addr: 'tcp.example.com:20001', forward: 22 });
   */
  tcpEndpoint(options: TcpEndpointOptions = {}): Promise<Endpoint> {
    return this.open('tcp', options);
  }

  /**
   * Bind a TLS endpoint: the edge routes by SNI and passes TLS through to the forward target.
   * @example const ep = await session.tlsEndpoint({ domain: 'secure.example.com', forward: 8443 });
   */
  tlsEndpoint(options: TlsEndpointOptions = {}): Promise<Endpoint> {
    return this.open('tls', options);
  }

  /**
   * Start a labeled tunnel: no URL of its own; edges whose tunnel-group backend matches the labels
   * route to it.
   * @example const t = await session.labeledTunnel({ labels: { app: 'web' }, forward: 3000 });
   */
  labeledTunnel(options: LabeledTunnelOptions): Promise<Endpoint> {
    return this.open('labeled', options);
  }

  /**
   * Close the session: endpoints go offline, the connection closes, no reconnect.
   * @example await session.close();
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.retryTimers.clear();
    this.pause.wake();
    const link = this.link;
    this.link = undefined;
    for (const endpoint of [...this.endpointSet]) endpoint.markClosed(undefined);
    this.endpointSet.clear();
    this.byId.clear();
    if (link) {
      link.heartbeat.stop();
      link.mux.close();
    }
    this.emit('close');
  }

  /** @internal Unbind one endpoint (Endpoint.close()). */
  async unbind(endpoint: Endpoint): Promise<void> {
    this.forget(endpoint);
    const link = this.link;
    if (!link || endpoint.id === '') return;
    try {
      await call(link.mux, StreamType.Unbind, { Id: endpoint.id }, { timeoutMs: RPC_TIMEOUT_MS });
    } catch (err) {
      // A lost connection unbinds too: the endpoint is not bound again on reconnect.
      if (this.link === link && !link.mux.closed) throw toAgentError(err, 'failed to unbind');
    }
  }

  /** @internal The first connection; rejects without retrying. */
  async start(): Promise<void> {
    const link = await this.establish(false);
    this.attach(link);
    this.emit('connected', { clientId: this.identity.clientId, resumed: false });
  }

  // ---- connecting ------------------------------------------------------------------------------

  private async establish(resume: boolean): Promise<Link> {
    const { link, identity } = await openLink(
      this.settings,
      resume ? this.identity : { clientId: '', cookie: '' },
      this,
      (ms) => this.emit('heartbeat', ms),
    );
    this.identity = identity;
    return link;
  }

  private attach(link: Link): void {
    this.link = link;
    link.mux.once('close', (reason: Error | undefined) => this.onLinkLost(link, reason));
  }

  private onLinkLost(link: Link, reason: Error | undefined): void {
    if (this.link !== link) return;
    this.link = undefined;
    link.heartbeat.stop();
    if (this.closing) return;
    if (Date.now() - link.connectedAt >= STABLE_AFTER_MS) this.failures = 0;
    this.emit('disconnected', reason);
    if (!this.settings.reconnect) {
      void this.close();
      return;
    }
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const limits = this.settings.reconnect!;
    while (!this.closing) {
      const attempt = this.failures++;
      const delayMs = this.immediate
        ? 0
        : backoffDelay(attempt, limits.initialDelay, limits.maxDelay);
      this.immediate = false;
      this.emit('reconnecting', { attempt: attempt + 1, delayMs });
      await this.pause.sleep(delayMs);
      if (this.closing) return;
      try {
        const link = await this.establish(true);
        if (this.closing) {
          link.mux.destroy();
          return;
        }
        this.attach(link);
        await this.rebindAll(link);
        if (this.link === link)
          this.emit('connected', { clientId: this.identity.clientId, resumed: true });
        return;
      } catch (err) {
        this.report(toAgentError(err, 'failed to reconnect'));
      }
    }
  }

  /** Emit 'error' only when someone listens: an unheard 'error' event would crash the process. */
  private report(error: BurrowAgentError): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }

  // ---- endpoints -------------------------------------------------------------------------------

  private async open(
    kind: EndpointProto | 'labeled',
    options: HttpEndpointOptions & TcpEndpointOptions & Partial<LabeledTunnelOptions>,
  ): Promise<Endpoint> {
    if (this.closing) throw new BurrowAgentError('the session is closed');
    const forwarder =
      options.forward === undefined
        ? undefined
        : createForwarder(options.forward, { connectTimeoutMs: this.settings.connectTimeout });
    const endpoint = new Endpoint(this, endpointSpec(kind, options, forwarder), forwarder);
    const link = await this.whenConnected();
    await this.bind(link, endpoint);
    this.endpointSet.add(endpoint);
    endpoint.once('close', () => this.forget(endpoint));
    return endpoint;
  }

  private async bind(link: Link, endpoint: Endpoint): Promise<void> {
    const pending = this.bindOnce(link, endpoint);
    this.pendingBinds.add(pending);
    try {
      await pending;
    } finally {
      this.pendingBinds.delete(pending);
    }
  }

  private async bindOnce(link: Link, endpoint: Endpoint): Promise<void> {
    const request = endpoint.bindRequest();
    const oldId = endpoint.id;
    try {
      if (endpoint.spec.kind === 'labeled') {
        const reply = await call(link.mux, StreamType.StartTunnelWithLabel, request, {
          timeoutMs: RPC_TIMEOUT_MS,
        });
        endpoint.bound(reply.Id, undefined, '');
      } else {
        const reply = await call(link.mux, StreamType.Bind, request, { timeoutMs: RPC_TIMEOUT_MS });
        endpoint.bound(reply.Id, reply.URL, reply.Extra?.Token ?? '');
      }
    } catch (err) {
      throw toAgentError(err, 'failed to bind the endpoint');
    }
    if (oldId !== endpoint.id) this.byId.delete(oldId);
    this.byId.set(endpoint.id, endpoint);
  }

  private async rebindAll(link: Link): Promise<void> {
    await Promise.all([...this.endpointSet].map((endpoint) => this.rebind(link, endpoint, 0)));
  }

  /** Bind again after a reconnect; a refusal is reported and retried with backoff. */
  private async rebind(link: Link, endpoint: Endpoint, attempt: number): Promise<void> {
    if (this.link !== link || endpoint.closed) return;
    try {
      await this.bind(link, endpoint);
    } catch (err) {
      if (this.link !== link || endpoint.closed) return;
      const where = endpoint.url ?? JSON.stringify(endpoint.labels);
      const error = toAgentError(err, `failed to bind ${where} again`);
      this.report(new BurrowAgentError(`${where}: ${error.message}`, error.code, { cause: err }));
      const limits = this.settings.reconnect!;
      const timer = setTimeout(
        () => {
          this.retryTimers.delete(timer);
          void this.rebind(link, endpoint, attempt + 1);
        },
        backoffDelay(attempt + 3, limits.initialDelay, limits.maxDelay),
      );
      this.retryTimers.add(timer);
    }
  }

  private forget(endpoint: Endpoint): void {
    this.endpointSet.delete(endpoint);
    if (this.byId.get(endpoint.id) === endpoint) this.byId.delete(endpoint.id);
  }

  private whenConnected(): Promise<Link> {
    if (this.link) return Promise.resolve(this.link);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => done(new BurrowAgentError('the session is reconnecting; try again')),
        RPC_TIMEOUT_MS,
      );
      const onConnected = (): void => done(undefined);
      const onClose = (): void => done(new BurrowAgentError('the session is closed'));
      const done = (err: BurrowAgentError | undefined): void => {
        clearTimeout(timer);
        this.off('connected', onConnected);
        this.off('close', onClose);
        if (err || !this.link) reject(err ?? new BurrowAgentError('the session is not connected'));
        else resolve(this.link);
      };
      this.on('connected', onConnected);
      this.on('close', onClose);
    });
  }

  // ---- ServerStreamHost ------------------------------------------------------------------------

  /** @internal */
  async endpointFor(id: string): Promise<Endpoint | undefined> {
    const endpoint = this.byId.get(id);
    if (endpoint || this.pendingBinds.size === 0) return endpoint;
    // The edge may route a connection before its bind reply reaches us.
    await Promise.allSettled([...this.pendingBinds]);
    return this.byId.get(id);
  }

  /** @internal */
  onCommand(which: 'stop' | 'restart', mux: MuxSession): void {
    if (which === 'stop') {
      this.emit('stop');
      void this.close();
    } else if (this.link?.mux === mux) {
      this.emit('restart');
      this.immediate = true;
      mux.close(); // GOAWAY after the answer, then a resumed session at once
    }
  }

  /** @internal */
  onStopTunnel(id: string, error: BurrowAgentError): void {
    const endpoint = this.byId.get(id);
    if (!endpoint) return;
    this.forget(endpoint);
    endpoint.markClosed(error);
  }
}
