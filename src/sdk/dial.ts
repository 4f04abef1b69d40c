import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { BURROW_ALPN } from '../protocol/index.js';
import { BurrowAgentError } from './errors.js';

/** Where the agent listener is, split from `host:port`. */
export interface ServerAddress {
  host: string;
  port: number;
}

/**
 * Split `host:port` (IPv6 in brackets); the port defaults to 443 like the other SDKs.
 * @example parseServerAddr('edge.example.com:4443') // { host: 'edge.example.com', port: 4443 }
 */
export function parseServerAddr(addr: string): ServerAddress {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+))(?::(\d{1,5}))?$/.exec(addr.trim());
  const port = m?.[3] === undefined ? 443 : Number(m[3]);
  if (!m || port < 1 || port > 65535) {
    throw new BurrowAgentError(`serverAddr must be host:port (e.g. 127.0.0.1:4443), got '${addr}'`);
  }
  return { host: (m[1] ?? m[2])!, port };
}

/**
 * The CA certificate(s) to trust, from PEM text, PEM bytes or the path of a PEM file.
 * @example loadCa('./burrow-data/ca.pem')
 */
export function loadCa(ca: string | Buffer): string | Buffer {
  if (Buffer.isBuffer(ca)) return ca;
  if (ca.includes('-----BEGIN')) return ca;
  try {
    return readFileSync(ca);
  } catch (err) {
    throw new BurrowAgentError(
      `cannot read the CA file '${ca}': ${(err as Error).message}. Pass the PEM text or the path of the server's ca.pem.`,
      undefined,
      { cause: err },
    );
  }
}

export interface DialOptions {
  address: ServerAddress;
  ca: string | Buffer | undefined;
  /** Name to verify the certificate against; default the host (no SNI for IP literals). */
  serverName: string | undefined;
  /** Offer ALPN `burrow/1` so both ends use the large stream window. */
  offerAlpn: boolean;
  timeoutMs: number;
}

/**
 * Open the TLS connection to the agent listener, verifying the certificate against `ca` (or the
 * system roots without one).
 * @example const socket = await dialEdge({ address, ca, serverName: undefined, offerAlpn: true, timeoutMs: 10_000 });
 */
export function dialEdge(options: DialOptions): Promise<tls.TLSSocket> {
  const { host, port } = options.address;
  const name = options.serverName ?? host;
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host,
      port,
      ...(net.isIP(name) ? {} : { servername: name }),
      ...(options.serverName !== undefined
        ? { checkServerIdentity: (_h: string, cert) => tls.checkServerIdentity(name, cert) }
        : {}),
      ...(options.ca !== undefined ? { ca: options.ca } : {}),
      ALPNProtocols: options.offerAlpn ? [BURROW_ALPN] : [],
      minVersion: 'TLSv1.2',
    });
    const timer = setTimeout(
      () => fail(new Error(`no TLS connection within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(
        new BurrowAgentError(`failed to connect to ${host}:${port}: ${err.message}`, undefined, {
          cause: err,
        }),
      );
    };
    socket.once('error', fail);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      socket.off('error', fail);
      socket.setKeepAlive(true, 30_000);
      resolve(socket);
    });
  });
}
