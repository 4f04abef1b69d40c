import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { basename } from 'node:path';
import {
  type Bind,
  type BindOpts,
  ErrorCode,
  type MuxStream,
  type ProxyHeader,
  type StartTunnelWithLabel,
} from '../protocol/index.js';
import { BurrowAgentError } from './errors.js';
import { createForwarder, type ForwardTarget, type Forwarder } from './forward.js';
import type { HttpExchange } from './http-observer.js';

/** The public protocol of an endpoint. */
export type EndpointProto = 'http' | 'https' | 'tcp' | 'tls';

/** Options every kind of endpoint takes. */
export interface EndpointOptions {
  /** Free text stored with the tunnel and shown by the API (`/tunnels`). */
  metadata?: string;
  /** Shown by the API; defaults to the forward target, or `app://<host>/<program>?pid=N`. */
  forwardsTo?: string;
  /** Start forwarding at once, as `endpoint.forward(target)` would. */
  forward?: ForwardTarget;
  /** Share the URL with other endpoints that pool it (the server balances between them). */
  poolingEnabled?: boolean;
  /**
   * `http2` when the service speaks HTTP/2 without TLS (h2c; a gRPC server, say): the edge then
   * speaks HTTP/2 to it over each stream, as with ngrok's `--app-protocol http2` (the bind's
   * ForwardsProto). Default `http1`. HTTP and HTTPS endpoints and labeled tunnels only.
   */
  appProtocol?: 'http1' | 'http2';
}

/** Options of `session.httpEndpoint()`. */
export interface HttpEndpointOptions extends EndpointOptions {
  /** The name to serve (reserved, under a reserved wildcard, or under the base domain); default random. */
  domain?: string;
  /** `https` (default) or `http`: the scheme of the URL the server gives back. */
  scheme?: 'https' | 'http';
  /** A traffic policy document (YAML or JSON text, or an object) applied at the edge. */
  trafficPolicy?: string | object;
  /**
   * Have the edge rewrite each request's Host header to where the endpoint forwards (its
   * `forwardsTo`, e.g. `localhost:3000`), for services that route by virtual host; the public
   * host stays in `X-Forwarded-Host`. The bind option HostHeaderRewrite.
   */
  hostHeaderRewrite?: boolean;
}

/** Options of `session.tcpEndpoint()`. */
export interface TcpEndpointOptions extends EndpointOptions {
  /** A reserved address `host:port`; default a random port. */
  addr?: string;
  trafficPolicy?: string | object;
}

/** Options of `session.tlsEndpoint()` (TLS is passed through to the forward target). */
export interface TlsEndpointOptions extends EndpointOptions {
  domain?: string;
  trafficPolicy?: string | object;
}

/** Options of `session.labeledTunnel()`: edges route to tunnels by their labels. */
export interface LabeledTunnelOptions extends EndpointOptions {
  labels: Record<string, string>;
}

/** Who connected, as the edge reported it. */
export interface ConnectionInfo {
  /** The public client's `ip:port`. */
  clientAddr: string;
  /** The public protocol: http, https, tcp or tls. */
  proto: string;
}

/** Events of an Endpoint. */
export interface EndpointEvents {
  /** A public connection arrived. */
  connection: [info: ConnectionInfo];
  /** An HTTP request was answered (http/https endpoints and labeled tunnels of HTTPS edges). */
  request: [exchange: HttpExchange];
  /** A connection could not be forwarded (local service down, refused, reset). */
  'forward-error': [error: BurrowAgentError, info: ConnectionInfo];
  /** The endpoint is gone: closed, its session closed, or stopped by the server (with why). */
  close: [error?: BurrowAgentError];
}

/** What a bind asks for; kept so the session can bind it again after a reconnect. */
export type EndpointSpec =
  | {
      kind: 'bind';
      proto: EndpointProto;
      opts: BindOpts;
      metadata: string;
      forwardsTo: string;
      poolingEnabled?: boolean;
      forwardsProto?: 'http2';
    }
  | {
      kind: 'labeled';
      labels: Record<string, string>;
      metadata: string;
      forwardsTo: string;
      forwardsProto?: 'http2';
    };

/** What an endpoint needs from its session. */
export interface EndpointHost {
  readonly connectTimeoutMs: number;
  /** Unbind on the server (best effort) and forget the endpoint. */
  unbind(endpoint: Endpoint): Promise<void>;
}

/** Connections that arrive before forward() is called wait, up to this many. */
const MAX_QUEUED = 128;

/** `ForwardsTo` when the user gave none: which program serves the endpoint. */
function defaultForwardsTo(): string {
  const program = basename(process.argv[1] ?? 'node');
  return `app://${hostname()}/${program}?pid=${process.pid}`;
}

/** Traffic policy text: strings as given, objects as JSON (the edge accepts both). */
export function policyText(policy: string | object | undefined): string | undefined {
  if (policy === undefined) return undefined;
  return typeof policy === 'string' ? policy : JSON.stringify(policy);
}

/**
 * Build the spec of an endpoint from its options; a bad forward target throws here, before
 * anything is bound.
 */
export function endpointSpec(
  kind: EndpointProto | 'labeled',
  options: Partial<HttpEndpointOptions & TcpEndpointOptions & LabeledTunnelOptions>,
  forwarder: Forwarder | undefined,
): EndpointSpec {
  const forwardsTo = options.forwardsTo ?? forwarder?.description ?? defaultForwardsTo();
  const metadata = options.metadata ?? '';
  if (options.appProtocol !== undefined && options.appProtocol !== 'http1') {
    if (options.appProtocol !== 'http2') {
      throw new BurrowAgentError(
        `appProtocol ${JSON.stringify(options.appProtocol)}: give 'http1' or 'http2'`,
      );
    }
    if (kind === 'tcp' || kind === 'tls') {
      throw new BurrowAgentError(
        `appProtocol 'http2' is for http and https endpoints, not ${kind}`,
      );
    }
  }
  const h2 = options.appProtocol === 'http2' ? { forwardsProto: 'http2' as const } : {};
  if (kind === 'labeled') {
    return { kind: 'labeled', labels: { ...(options.labels ?? {}) }, metadata, forwardsTo, ...h2 };
  }
  const opts: BindOpts =
    kind === 'tcp' ? { Addr: options.addr ?? '' } : { Domain: options.domain ?? '' };
  const policy = policyText(options.trafficPolicy);
  if (policy !== undefined) opts.TrafficPolicy = policy;
  if (options.hostHeaderRewrite === true && (kind === 'http' || kind === 'https')) {
    opts.HostHeaderRewrite = true;
  }
  const spec: EndpointSpec = { kind: 'bind', proto: kind, opts, metadata, forwardsTo, ...h2 };
  if (options.poolingEnabled === true) spec.poolingEnabled = true;
  return spec;
}

/**
 * One endpoint (or labeled tunnel) of a session: where the public reaches it (`url`), where its
 * connections go (`forward()`), and `close()`. It survives reconnects: the session binds it
 * again with its id and token, so the URL stays the same.
 *
 * @example
 * const endpoint = await session.httpEndpoint({ domain: 'app.example.com' });
 * endpoint.forward('localhost:3000');
 * endpoint.on('request', (r) => console.log(r.method, r.path, r.status, `${r.durationMs} ms`));
 * console.log(endpoint.url); // https://app.example.com
 * await endpoint.close();
 */
export class Endpoint extends EventEmitter<EndpointEvents> {
  /** http, https, tcp or tls; undefined for labeled tunnels. */
  readonly proto: EndpointProto | undefined;
  /** The labels of a labeled tunnel. */
  readonly labels: Readonly<Record<string, string>> | undefined;
  /** @internal */
  readonly spec: EndpointSpec;
  /** @internal The re-bind token the server gave with the last bind. */
  token = '';

  private bindId = '';
  private publicUrl: string | undefined;
  private forwarder: Forwarder | undefined;
  private readonly queued: Array<[MuxStream, ProxyHeader]> = [];
  private isClosed = false;
  private captureBytes = 0;

  /** @internal Sessions create endpoints. */
  constructor(
    private readonly host: EndpointHost,
    spec: EndpointSpec,
    forwarder: Forwarder | undefined,
  ) {
    super();
    this.spec = spec;
    this.proto = spec.kind === 'bind' ? spec.proto : undefined;
    this.labels = spec.kind === 'labeled' ? spec.labels : undefined;
    this.forwarder = forwarder;
  }

  /** The bind id (labeled tunnels: the tunnel id), stable across reconnects for binds. */
  get id(): string {
    return this.bindId;
  }

  /** The public URL, e.g. `https://k3j9x0a1b2.burrow.localhost:8443`; undefined for labeled tunnels. */
  get url(): string | undefined {
    return this.publicUrl;
  }

  /** What the server was told the endpoint forwards to. */
  get forwardsTo(): string {
    return this.spec.forwardsTo;
  }

  /** True once closed (by close(), the session, or the server). */
  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * Send the endpoint's connections to `target`: a port, `host:port`, a URL, a Node server, or
   * a request handler. Connections that arrived before are handed over now.
   * @example endpoint.forward(3000)
   * @example endpoint.forward((req, res) => res.end('hello'))
   */
  forward(target: ForwardTarget): this {
    this.forwarder = createForwarder(target, { connectTimeoutMs: this.host.connectTimeoutMs });
    for (const [stream, header] of this.queued.splice(0)) this.dispatch(stream, header);
    return this;
  }

  /**
   * Keep up to `maxBytes` of each request and response (head, then body as framed) in the
   * `request` event's exchange (`request.raw`, `response.raw`), for a local inspector; 0 stops.
   * Only connections forwarded to a local address are captured.
   * @example endpoint.capture(10 * 1024).on('request', (x) => inspector.add(x));
   */
  capture(maxBytes: number): this {
    if (!Number.isInteger(maxBytes) || maxBytes < 0) {
      throw new BurrowAgentError(`capture(${maxBytes}): give a whole number of bytes, 0 or more`);
    }
    this.captureBytes = maxBytes;
    return this;
  }

  /**
   * Stop serving: the server unbinds the URL (the public then gets 404 / connection refused).
   * Connections already open carry on until they end.
   * @example await endpoint.close();
   */
  async close(): Promise<void> {
    if (this.isClosed) return;
    try {
      await this.host.unbind(this);
    } finally {
      // Forgotten by the session either way: it is not bound again on reconnect.
      this.markClosed(undefined);
    }
  }

  /** @internal The bind request (with the old id and token when binding again). */
  bindRequest(): Bind | StartTunnelWithLabel {
    const spec = this.spec;
    if (spec.kind === 'labeled') {
      return {
        Labels: spec.labels,
        ForwardsTo: spec.forwardsTo,
        ForwardsProto: spec.forwardsProto ?? '',
        Metadata: spec.metadata,
      };
    }
    return {
      Id: this.bindId,
      Proto: spec.proto,
      ForwardsTo: spec.forwardsTo,
      ForwardsProto: spec.forwardsProto ?? '',
      Opts: spec.opts,
      Extra: {
        Token: this.token,
        Metadata: spec.metadata,
        Bindings: ['public'],
        ...(spec.poolingEnabled === true && { PoolingEnabled: true }),
      },
    };
  }

  /** @internal The server's answer to a bind. */
  bound(id: string, url: string | undefined, token: string): void {
    this.bindId = id;
    if (url !== undefined) this.publicUrl = url;
    this.token = token;
  }

  /** @internal A proxied connection for this endpoint. */
  accept(stream: MuxStream, header: ProxyHeader): void {
    if (this.isClosed) {
      stream.reset(ErrorCode.StreamRefused);
      return;
    }
    if (this.forwarder) {
      this.dispatch(stream, header);
      return;
    }
    if (this.queued.length >= MAX_QUEUED) {
      stream.reset(ErrorCode.AcceptQueueFull);
      return;
    }
    this.queued.push([stream, header]);
    stream.once('close', () => {
      const at = this.queued.findIndex(([s]) => s === stream);
      if (at >= 0) this.queued.splice(at, 1);
    });
  }

  /** @internal Closed for good; `error` says why when the server stopped it. */
  markClosed(error: BurrowAgentError | undefined): void {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const [stream] of this.queued.splice(0)) stream.reset(ErrorCode.StreamRefused);
    this.emit('close', error);
  }

  private dispatch(stream: MuxStream, header: ProxyHeader): void {
    const info: ConnectionInfo = { clientAddr: header.ClientAddr, proto: header.Proto };
    this.emit('connection', info);
    this.forwarder!.handle(stream, header, {
      url: this.publicUrl,
      onExchange: this.listenerCount('request') > 0 ? (x) => this.emit('request', x) : undefined,
      captureBytes: this.captureBytes,
      http2: this.spec.forwardsProto === 'http2',
      onError: (err) => {
        const error =
          err instanceof BurrowAgentError
            ? err
            : new BurrowAgentError(err.message, undefined, { cause: err });
        this.emit('forward-error', error, info);
      },
    });
  }
}
