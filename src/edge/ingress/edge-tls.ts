/**
 * TLS termination for TLS edges (`tls_termination.terminate_at: edge`): the edge's certificate for
 * the name the client asked for, the module's minimum version, and, with `mutual_tls`, a client
 * certificate that chains to one of the edge's certificate authorities.
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
import type { TlsTerminationModule } from '../../store/edges.js';
import type { CertificateStore, ServedCertificate } from '../certificates/certificate-store.js';
import { enforceHandshakeDeadline } from '../listeners/handshake-deadline.js';

/** What the terminating edge applies; TLS 1.2 is the minimum when the module names none. */
export interface TerminationSettings {
  minVersion: TlsTerminationModule['min_version'];
  /** With mutual TLS: the CAs a client certificate must chain to (a client without one is refused). */
  caPems: string[] | null;
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

/**
 * One TLS server per terminating edge: sockets whose ClientHello was already read are handed over
 * with `accept()`, and `onSecure` gets each one whose handshake (and client certificate check)
 * succeeded. The protocol floor and the client CAs live in the server's own default context as
 * well as in each certificate's context, because OpenSSL fixes the version range when the
 * connection starts, before SNI picks a certificate.
 * @example
 * const t = new EdgeTlsTerminator({ minVersion: '1.3', caPems: null }, certificates, (s) => serve(s));
 * t.accept(socket, hello);
 */
export class EdgeTlsTerminator {
  readonly server: Server;
  private readonly contexts = new WeakMap<ServedCertificate, SecureContext>();

  constructor(
    readonly settings: TerminationSettings,
    private readonly certificates: Pick<CertificateStore, 'certificateFor'>,
    onSecure: (socket: TLSSocket) => void,
    options: { logger?: Logger | undefined; handshakeTimeoutMs?: number | undefined } = {},
  ) {
    const mutual = settings.caPems !== null;
    this.server = createServer({
      SNICallback: (name, callback) => {
        this.contextFor(name).then(
          (context) => callback(null, context),
          (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
        );
      },
      minVersion: nodeMinVersion(settings.minVersion),
      requestCert: mutual,
      rejectUnauthorized: mutual,
      ...(mutual ? { ca: settings.caPems! } : {}),
    });
    this.server.on('secureConnection', onSecure);
    enforceHandshakeDeadline(this.server, options.handshakeTimeoutMs, options.logger);
  }

  /** Take over `socket`, whose first bytes (`hello`) were read to route it. */
  accept(socket: Socket, hello: Buffer): void {
    socket.unshift(hello);
    this.server.emit('connection', socket);
  }

  private async contextFor(name: string): Promise<SecureContext> {
    const served = await this.certificates.certificateFor(name);
    let context = this.contexts.get(served);
    if (!context) {
      context = createSecureContext({
        cert: served.certPem,
        key: served.keyPem,
        minVersion: nodeMinVersion(this.settings.minVersion),
        ...(this.settings.caPems ? { ca: this.settings.caPems } : {}),
      });
      this.contexts.set(served, context);
    }
    return context;
  }
}
