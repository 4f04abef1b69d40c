/**
 * The HTTPS port (`--https-listen`). Each connection's ClientHello is read (and kept) to learn the
 * server name: a `tls` route for that name (a TLS endpoint, or a TLS edge's hostport) gets the
 * connection passed through untouched, with the client's own TLS ending at the agent, unless the
 * route terminates at the edge or its policy runs terminate-tls (then TLS ends here and the agent
 * gets plaintext), or forward-internal hands the connection to an internal TLS
 * endpoint (`tls://name.internal`) and its agent; anything else is terminated here with a
 * certificate from the CertificateStore and served by the HTTP ingress as https.
 */
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import {
  createServer as createTlsServer,
  type TLSSocket,
  type Server as TlsServer,
} from 'node:tls';
import { DEFAULT_LIMITS } from '../../core/limits.js';
import type { Logger } from '../../core/logger.js';
import type { TlsTermination } from '../../policy/index.js';
import type { CertificateStore } from '../certificates/certificate-store.js';
import { offeredTlsVersion, scanClientHello, TLS_INTERNAL_ERROR_ALERT } from './client-hello.js';
import { enforceHandshakeDeadline } from '../listeners/handshake-deadline.js';
import type { EndpointMeters } from '../metrics/endpoint-meters.js';
import { EdgeTlsTerminator, tlsInputOf } from './edge-tls.js';
import { INGRESS_ERRORS, rawErrorResponse } from './error-pages.js';
import type { HttpIngress } from './http/http-ingress.js';
import { admitThrough, connInputOf, type EdgeTlsEnd } from './policy-gate.js';
import {
  INGRESS_SOCKET_OPTIONS,
  relayTimeoutsOf,
  TunnelRelays,
  type RawRelayTimeouts,
  type RelayClosedHook,
} from './proxy.js';
import type { EdgeTermination, OnlineTunnel, TunnelRegistry } from '../registry/tunnel-registry.js';

/** A TLS endpoint's on_tcp_connect forwards only to internal TLS endpoints. */
const TLS_HOPS = ['tls'] as const;

export interface SniRouterOptions {
  registry: TunnelRegistry;
  meters: EndpointMeters;
  http: HttpIngress;
  certificates: CertificateStore;
  /** Served to clients that send no SNI (those dialling an IP). Without it they are refused. */
  defaultCertificate?: { certPem: string; keyPem: string } | undefined;
  logger?: Logger | undefined;
  connectTimeoutMs?: number | undefined;
  /** A client must finish its ClientHello within this time. Default 10 s. */
  helloTimeoutMs?: number | undefined;
  /** And the whole handshake, when terminated here, within this time. Default 10 s. */
  handshakeTimeoutMs?: number | undefined;
  /** When passthrough and terminated relays end for going quiet; default DEFAULT_LIMITS'. */
  relayTimeouts?: RawRelayTimeouts | undefined;
  /** Told of each relayed connection as it ends (traffic events). */
  onRelayClosed?: RelayClosedHook | undefined;
}

/** A connection on its way to a TLS endpoint's agent, through forward-internal hops. */
interface TlsConnection {
  socket: Socket;
  /** The ClientHello, read and kept: the agent (passthrough) or the terminator gets it. */
  hello: Buffer;
  serverName: string | undefined;
  /** Set once terminate-tls ended TLS here; the relay then carries plaintext. */
  terminated?: TLSSocket | undefined;
}

/** True when a non-TLS first byte looks like the start of an HTTP method (`GET`, `POST`, ...). */
function looksLikeHttp(first: number | undefined): boolean {
  return first !== undefined && first >= 0x41 && first <= 0x5a;
}

/**
 * @example
 * const router = new SniRouter({ registry, meters, http, certificates });
 * router.server.listen(8443, '127.0.0.1');
 */
export class SniRouter {
  readonly server: Server;
  readonly tlsServer: TlsServer;
  private readonly options: SniRouterOptions;
  private readonly relays: TunnelRelays;
  /** Connections whose ClientHello is still being read. */
  private readonly pending = new Set<Socket>();
  /** Connections in a terminate-tls handshake. */
  private readonly terminating = new Set<Socket>();
  /**
   * One TLS server per set of termination settings: per terminate-tls action (compiled once per
   * policy) and per TLS edge that terminates (built once per edge load).
   */
  private readonly terminators = new WeakMap<TlsTermination | EdgeTermination, EdgeTlsTerminator>();

  constructor(options: SniRouterOptions) {
    this.options = options;
    this.relays = new TunnelRelays(
      options.meters,
      options.connectTimeoutMs,
      options.relayTimeouts ?? relayTimeoutsOf(DEFAULT_LIMITS),
      options.onRelayClosed,
    );
    const cert = options.defaultCertificate;
    this.tlsServer = createTlsServer({
      SNICallback: options.certificates.sniCallback,
      // HTTP/2 clients are served by ingress/http/h2-ingress.ts, HTTP/1.1 ones by the lean relay.
      ALPNProtocols: ['h2', 'http/1.1'],
      ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
    });
    this.tlsServer.on('secureConnection', (socket: TLSSocket) => {
      options.http.acceptTls(socket);
    });
    enforceHandshakeDeadline(this.tlsServer, options.handshakeTimeoutMs, options.logger);
    this.server = createNetServer(INGRESS_SOCKET_OPTIONS, (socket) => this.onConnection(socket));
  }

  /** Relays (TLS passthrough) and connections still in their ClientHello or terminate-tls handshake. */
  get openConnections(): number {
    return this.relays.size + this.pending.size + this.terminating.size;
  }

  destroyAll(): void {
    this.relays.destroyAll();
    for (const socket of this.pending) socket.destroy();
    for (const socket of this.terminating) socket.destroy();
  }

  private onConnection(socket: Socket): void {
    const timeout = this.options.helloTimeoutMs ?? 10_000;
    let buffered: Buffer | undefined;
    this.pending.add(socket);
    const done = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', done);
      socket.pause();
      this.pending.delete(socket);
    };
    const timer = setTimeout(() => {
      done();
      socket.destroy();
    }, timeout);
    timer.unref();
    socket.on('error', () => socket.destroy());
    socket.once('close', done);
    const onData = (chunk: Buffer): void => {
      buffered = buffered === undefined ? chunk : Buffer.concat([buffered, chunk]);
      const scan = scanClientHello(buffered);
      if (scan.kind === 'incomplete') return;
      done();
      if (scan.kind === 'hello') {
        this.dispatch(socket, buffered, scan.serverName);
      } else if (scan.kind === 'not-tls' && looksLikeHttp(buffered[0])) {
        this.options.meters.unrouted.request(INGRESS_ERRORS.plainHttpOnHttpsPort.status);
        socket.end(rawErrorResponse(INGRESS_ERRORS.plainHttpOnHttpsPort, ''));
      } else {
        this.options.logger?.debug({ scan }, 'not a TLS ClientHello on the HTTPS port');
        socket.destroy();
      }
    };
    socket.on('data', onData);
  }

  private dispatch(socket: Socket, hello: Buffer, serverName: string | undefined): void {
    const found = serverName === undefined ? undefined : this.options.registry.byHost(serverName);
    if (found?.proto === 'tls') {
      // TLS endpoints and TLS edges' hostports; pooled endpoints: the next member.
      this.admit({ socket, hello, serverName }, this.options.registry.pick(found), []);
      return;
    }
    // Give the bytes back so the TLS server reads the ClientHello as if it had never been seen.
    socket.unshift(hello);
    this.tlsServer.emit('connection', socket);
  }

  /**
   * The endpoint's on_tcp_connect first: TLS facts are the ClientHello's (offered version); rules
   * after a terminate-tls see the finished handshake. Then its agent, or the internal TLS endpoint
   * forward-internal chose (policy-gate.ts admitThrough; the connection as it is, the ClientHello
   * or, once terminated, plaintext).
   */
  private admit(conn: TlsConnection, tunnel: OnlineTunnel, chain: string[]): void {
    const { socket, hello, serverName } = conn;
    const input = () =>
      connInputOf(
        socket,
        conn.terminated
          ? tlsInputOf(conn.terminated)
          : { sni: serverName, version: offeredTlsVersion(hello) },
      );
    const endTlsAt =
      (at: OnlineTunnel): EdgeTlsEnd =>
      async (settings) => {
        if (conn.terminated) {
          // An endpoint earlier in the forward chain ended TLS with its own settings; this one's
          // (client certificates, versions) cannot be applied to it any more: closed, not skipped.
          this.options.logger?.debug(
            { tunnel: at.id },
            'terminate-tls on a connection already terminated by the endpoint that forwarded it',
          );
          return undefined;
        }
        conn.terminated = await this.terminate(socket, hello, settings);
        return conn.terminated && tlsInputOf(conn.terminated);
      };
    admitThrough(this.options.registry, socket, tunnel, chain, {
      protos: TLS_HOPS,
      gate: (at) => ({ conn: input, endTls: endTlsAt(at) }),
      serve: (served) => {
        if (conn.terminated) this.relayPlaintext(conn.terminated, served);
        else this.passThrough(socket, hello, served);
      },
      refuse: (refused, why) => {
        this.options.logger?.debug({ tunnel: refused.id, why }, 'connection refused');
        this.refuse(conn);
      },
    });
  }

  /**
   * Close a connection that goes nowhere: a TLS alert to a client still waiting for the server's
   * answer to its ClientHello, the terminated TLS connection closed otherwise.
   */
  private refuse(conn: TlsConnection): void {
    if (conn.terminated) {
      conn.terminated.destroy();
      return;
    }
    const { socket } = conn;
    if (socket.destroyed) return;
    socket.end(TLS_INTERNAL_ERROR_ALERT, () => socket.destroy());
  }

  /**
   * End TLS here: a TLS edge's termination, or terminate-tls with the action's settings (the
   * edge's certificate for the name unless the policy brought its own); undefined when it failed.
   */
  private async terminate(
    socket: Socket,
    hello: Buffer,
    settings: TlsTermination | EdgeTermination,
  ): Promise<TLSSocket | undefined> {
    let terminator = this.terminators.get(settings);
    if (!terminator) {
      const own = 'certificate' in settings ? settings.certificate : undefined;
      terminator = new EdgeTlsTerminator(
        {
          minVersion: settings.minVersion,
          maxVersion: 'maxVersion' in settings ? settings.maxVersion : undefined,
          caPems: settings.clientCas ? [...settings.clientCas] : null,
          clientAuth: 'clientAuth' in settings ? settings.clientAuth : undefined,
        },
        own ? { certificateFor: () => Promise.resolve(own) } : this.options.certificates,
        // Every socket arrives through handshake(), which takes it; nothing is left for this.
        (tls) => tls.destroy(),
        { logger: this.options.logger, handshakeTimeoutMs: this.options.handshakeTimeoutMs },
      );
      this.terminators.set(settings, terminator);
    }
    this.terminating.add(socket);
    try {
      return await terminator.handshake(socket, hello);
    } finally {
      this.terminating.delete(socket);
    }
  }

  private relayPlaintext(tls: TLSSocket, tunnel: OnlineTunnel): void {
    tls.on('error', () => tls.destroy());
    // The relay's pipelines, the TLS server and its handshake deadline each watch 'close': more
    // than Node's leak-warning default of 10, all released when the connection closes.
    tls.setMaxListeners(20);
    this.relays.start(tls, tunnel, {
      proto: 'tls',
      passthroughTls: false,
      onConnectFailed: (err) => {
        this.options.logger?.debug({ err, tunnel: tunnel.id }, 'terminated TLS connect failed');
        tls.destroy();
      },
    });
  }

  private passThrough(socket: Socket, hello: Buffer, tunnel: OnlineTunnel): void {
    this.relays.start(socket, tunnel, {
      proto: 'tls',
      firstBytes: hello,
      onConnectFailed: (err) => {
        this.options.logger?.debug({ err, tunnel: tunnel.id }, 'TLS passthrough connect failed');
        socket.end(TLS_INTERNAL_ERROR_ALERT);
      },
    });
  }
}
