import { execFileSync } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import { MuxSession, type MuxSessionOptions } from '../../src/protocol/muxado/session.js';

/** Two connected loopback TCP sockets: [client side, server side]. */
export async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => client.once('connect', resolve));
  const serverSide = await accepted;
  server.close();
  return [client, serverSide];
}

/** A self-signed certificate for 127.0.0.1, made with openssl. */
export function selfSignedCert(): { key: Buffer; cert: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-mux-'));
  try {
    execFileSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'],
        ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1'],
        ...['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Two connected TLS sockets over loopback; the client offers `clientAlpn`. */
export async function tlsPair(clientAlpn: string[] = []): Promise<[tls.TLSSocket, tls.TLSSocket]> {
  const { key, cert } = selfSignedCert();
  const server = tls.createServer({ key, cert, ALPNProtocols: ['burrow/1'] });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = new Promise<tls.TLSSocket>((resolve) =>
    server.once('secureConnection', resolve),
  );
  const client = tls.connect({
    port: (server.address() as net.AddressInfo).port,
    host: '127.0.0.1',
    ca: cert,
    ALPNProtocols: clientAlpn,
  });
  await new Promise((resolve) => client.once('secureConnect', resolve));
  const serverSide = await accepted;
  server.close();
  return [client, serverSide];
}

/** A client and a server session over a fresh socket pair. */
export async function sessionPair(
  options: Partial<MuxSessionOptions> = {},
): Promise<{ client: MuxSession; server: MuxSession }> {
  const [a, b] = await socketPair();
  return {
    client: new MuxSession(a, { ...options, role: 'client' }),
    server: new MuxSession(b, { ...options, role: 'server' }),
  };
}

/**
 * Everything a readable yields until it ends. Unlike `for await`, this leaves a Duplex open for
 * writing afterwards (the async iterator destroys the stream when it finishes).
 */
export function readAll(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => parts.push(chunk));
    stream.once('end', () => resolve(Buffer.concat(parts)));
    stream.once('error', reject);
    stream.once('close', () => reject(new Error('stream closed before it ended')));
  });
}

/** The next `event` of `emitter`, failing after `ms`. */
export function nextEvent<T = unknown>(
  emitter: EventEmitter,
  event: string,
  ms = 5000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within ${ms} ms`)), ms);
    emitter.once(event, (value: T) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

/** Bytes received on a raw socket, for asserting what a session sent. */
export function captured(socket: net.Socket): { bytes: () => Buffer; clear: () => void } {
  const parts: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => parts.push(chunk));
  return { bytes: () => Buffer.concat(parts), clear: () => void (parts.length = 0) };
}

/** Poll `check` until it is true or `ms` passes. */
export async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
