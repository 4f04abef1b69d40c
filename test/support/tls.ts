import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import {
  checkServerIdentity,
  connect,
  createServer,
  type PeerCertificate,
  type TlsOptions,
} from 'node:tls';

/** A TLS server on 127.0.0.1 (random port) that completes handshakes and closes. */
export interface TestTlsServer {
  port: number;
  setSecureContext(
    options: Parameters<ReturnType<typeof createServer>['setSecureContext']>[0],
  ): void;
  close(): Promise<void>;
}

/** Start a TLS server with `options` (cert/key and/or SNICallback). */
export async function startTlsServer(options: TlsOptions): Promise<TestTlsServer> {
  const server = createServer(options, (socket) => socket.end('ok'));
  // Handshake failures are what some tests provoke; they must not crash the test process.
  server.on('tlsClientError', () => undefined);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    setSecureContext: (o) => server.setSecureContext(o),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
      }),
  };
}

export interface TlsProbeResult {
  ok: boolean;
  /** The client's error code or message when the handshake or verification failed. */
  error?: string;
  peer?: PeerCertificate;
}

/**
 * Connect like a strict client: trust only `ca`, verify the certificate against `verifyAs` (by
 * default the SNI name, or the IP dialled when no SNI is sent).
 */
export async function tlsProbe(options: {
  port: number;
  ca: string;
  servername?: string;
  verifyAs?: string;
}): Promise<TlsProbeResult> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port: options.port,
      ca: options.ca,
      ...(options.servername !== undefined ? { servername: options.servername } : {}),
      ...(options.verifyAs !== undefined
        ? { checkServerIdentity: (_host, cert) => checkServerIdentity(options.verifyAs!, cert) }
        : {}),
    });
    socket.setTimeout(5000, () => socket.destroy(new Error('timeout')));
    socket.once('secureConnect', () => {
      const peer = socket.getPeerCertificate();
      socket.destroy();
      resolve({ ok: socket.authorized, peer });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      socket.destroy();
      resolve({ ok: false, error: err.code ?? err.message });
    });
  });
}
