/**
 * TLS termination at the edge, for TLS edges (`tls_termination.terminate_at: edge`) and for TLS
 * endpoints whose policy runs terminate-tls: the edge's certificate for the name the client asked
 * for (or one of the policy's own), a version range, and, with mutual TLS, a client certificate
 * that chains to one of the given certificate authorities.
 */
import type { Socket } from 'node:net';
import {
  createSecureContext,
  createServer,
  type SecureContext,
  type SecureVersion,
  type Server,
  type TLSSocket,
} from 'node:tls';
import type { Logger } from '../../core/logger.js';
import type { TlsInput } from '../../policy/index.js';
import type { TlsTerminationModule } from '../../store/edges.js';
import { sniCallbackOf, type ServedCertificate } from '../certificates/certificate-store.js';
import { connectionKey, enforceHandshakeDeadline } from '../listeners/handshake-deadline.js';

/** What the terminating edge applies; TLS 1.2 is the minimum when the module names none. */
export interface TerminationSettings {
  minVersion: TlsTerminationModule['min_version'];
  /** The highest version offered; Node's default (1.3) when unset. */
  maxVersion?: string | null | undefined;
  /** With mutual TLS: the CAs a client certificate must chain to (a client without one is refused). */
  caPems: string[] | null;
  /**
   * How a client certificate is asked for: `require-and-verify` (the default with caPems) refuses
   * a client without one that chains to caPems; `require-any` refuses a client without one but
   * does not verify it; `request` asks and takes what comes. Unset without caPems: none is asked.
   */
  clientAuth?: 'require-and-verify' | 'require-any' | 'request' | undefined;
}

/** Where the served certificate comes from: the CertificateStore, or a fixed one. */
export interface CertificateSource {
  certificateFor(name: string): Promise<Pick<ServedCertificate, 'certPem' | 'keyPem'>>;
}

const NODE_VERSIONS: Readonly<Record<string, SecureVersion>> = {
  '1.0': 'TLSv1',
  '1.1': 'TLSv1.1',
  '1.2': 'TLSv1.2',
  '1.3': 'TLSv1.3',
};

/**
 * The Node name of a module's `min_version`, TLS 1.2 when unset.
 * @example nodeMinVersion('1.3') // 'TLSv1.3'
 */
export function nodeMinVersion(version: string | null): SecureVersion {
  return NODE_VERSIONS[version ?? '1.2'] ?? 'TLSv1.2';
}

/** The Node name of a `max_version`, TLS 1.3 when unset. */
function nodeMaxVersion(version: string | null | undefined): SecureVersion {
  return NODE_VERSIONS[version ?? '1.3'] ?? 'TLSv1.3';
}

/**
 * The `conn.tls` facts of a terminated connection: negotiated version and cipher, SNI, ALPN,
 * resumption, and the client certificate when there is one.
 * @example runner.onTcpConnect({ conn: connInputOf(socket, tlsInputOf(socket)) })
 */
export function tlsInputOf(socket: TLSSocket): TlsInput {
  const cipher = socket.getCipher();
  const alpn = socket.alpnProtocol;
  return {
    version: socket.getProtocol() ?? '',
    cipher_suite: cipher.standardName ?? cipher.name,
    sni: typeof socket.servername === 'string' ? socket.servername : '',
    negotiated_alpn: typeof alpn === 'string' ? alpn : '',
    session_resumed: socket.isSessionReused(),
    client: socket.getPeerX509Certificate(),
  };
}

/**
 * One TLS server per set of settings: sockets whose ClientHello was already read are handed over
 * with `accept()` (then `onSecure` gets each one whose handshake and client certificate check
 * succeeded) or `handshake()` (which resolves with it). The version range and the client CAs live
 * in the server's own default context as well as in each certificate's context, because OpenSSL
 * fixes the version range when the connection starts, before SNI picks a certificate.
 * @example
 * const t = new EdgeTlsTerminator({ minVersion: '1.3', caPems: null }, certificates, (s) => serve(s));
 * t.accept(socket, hello);
 */
export class EdgeTlsTerminator {
  readonly server: Server;
  private readonly contexts = new WeakMap<object, SecureContext>();
  /** Sockets handed over with handshake(), by connectionKey, until their handshake ends. */
  private readonly waiting = new Map<string, (socket: TLSSocket | undefined) => void>();

  constructor(
    readonly settings: TerminationSettings,
    private readonly certificates: CertificateSource,
    onSecure: (socket: TLSSocket) => void,
    options: { logger?: Logger | undefined; handshakeTimeoutMs?: number | undefined } = {},
  ) {
    const clientAuth =
      settings.clientAuth ?? (settings.caPems !== null ? 'require-and-verify' : undefined);
    const verify = clientAuth === 'require-and-verify';
    this.server = createServer({
      SNICallback: sniCallbackOf(
        (name) => this.contextFor(name),
        (err) => (err instanceof Error ? err : new Error(String(err))),
      ),
      minVersion: nodeMinVersion(settings.minVersion),
      maxVersion: nodeMaxVersion(settings.maxVersion),
      requestCert: clientAuth !== undefined,
      rejectUnauthorized: verify,
      ...(settings.caPems ? { ca: settings.caPems } : {}),
    });
    this.server.on('secureConnection', (socket: TLSSocket) => {
      // require-any: Node refuses only unverified certificates, so a missing one is refused here.
      if (clientAuth === 'require-any' && !socket.getPeerX509Certificate()) {
        options.logger?.debug({ client: socket.remoteAddress }, 'no client certificate: closing');
        socket.destroy();
        return;
      }
      const key = connectionKey(socket);
      const waiter = this.waiting.get(key);
      if (waiter) {
        this.waiting.delete(key);
        waiter(socket);
      } else {
        onSecure(socket);
      }
    });
    enforceHandshakeDeadline(this.server, options.handshakeTimeoutMs, options.logger);
  }

  /** Take over `socket`, whose first bytes (`hello`) were read to route it. */
  accept(socket: Socket, hello: Buffer): void {
    socket.unshift(hello);
    this.server.emit('connection', socket);
  }

  /**
   * Take over `socket` like accept(), and resolve with its TLS side once the handshake (and the
   * client certificate check) passed; undefined when the connection closed before that.
   */
  handshake(socket: Socket, hello: Buffer): Promise<TLSSocket | undefined> {
    const key = connectionKey(socket);
    return new Promise((resolve) => {
      const settle = (tls: TLSSocket | undefined): void => {
        socket.off('close', closed);
        resolve(tls);
      };
      const closed = (): void => {
        if (this.waiting.get(key) === settle) this.waiting.delete(key);
        settle(undefined);
      };
      this.waiting.set(key, settle);
      socket.once('close', closed);
      this.accept(socket, hello);
    });
  }

  private async contextFor(name: string): Promise<SecureContext> {
    const served = await this.certificates.certificateFor(name);
    let context = this.contexts.get(served);
    if (!context) {
      context = createSecureContext({
        cert: served.certPem,
        key: served.keyPem,
        minVersion: nodeMinVersion(this.settings.minVersion),
        maxVersion: nodeMaxVersion(this.settings.maxVersion),
        ...(this.settings.caPems ? { ca: this.settings.caPems } : {}),
      });
      this.contexts.set(served, context);
    }
    return context;
  }
}
