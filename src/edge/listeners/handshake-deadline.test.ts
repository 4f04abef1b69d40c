import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certificateMaker } from '../../../test/support/certificates.js';
import { enforceHandshakeDeadline } from './handshake-deadline.js';

const DEADLINE_MS = 400;

/** Milliseconds until `socket` closes (or `limitMs`, reported as Infinity). */
function closesWithin(socket: net.Socket, limitMs: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(Infinity), limitMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
  });
}

describe('enforceHandshakeDeadline', () => {
  let server: tls.Server;
  let port: number;
  const maker = certificateMaker();

  beforeAll(async () => {
    const cert = maker.make('/CN=localhost', ['subjectAltName=DNS:localhost']);
    server = tls.createServer({ cert, key: maker.lastKey() }, (socket) => {
      socket.on('data', (d: Buffer) => socket.write(d));
      socket.on('error', () => {});
    });
    enforceHandshakeDeadline(server, DEADLINE_MS);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.close();
    maker.cleanup();
  });

  const raw = (): net.Socket => net.connect(port, '127.0.0.1').on('error', () => {});

  it('closes a connection that never starts its handshake', async () => {
    expect(await closesWithin(raw(), 5000)).toBeLessThan(5000);
  });

  it('closes a connection that trickles its ClientHello one byte at a time', async () => {
    const socket = raw();
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]));
    const drip = setInterval(() => socket.write(Buffer.from([0x01])), DEADLINE_MS / 4);
    const ms = await closesWithin(socket, 5000);
    clearInterval(drip);
    expect(ms).toBeLessThan(5000);
    expect(ms).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
  });

  it('closes a connection whose handshake fails', async () => {
    const socket = raw();
    socket.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(await closesWithin(socket, DEADLINE_MS / 2)).toBeLessThan(DEADLINE_MS / 2);
  });

  it('leaves a connection alone once its handshake is done', async () => {
    const client = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false });
    await once(client, 'secureConnect');
    await new Promise((resolve) => setTimeout(resolve, DEADLINE_MS * 2));
    client.write('still here');
    const [echo] = (await once(client, 'data')) as [Buffer];
    expect(String(echo)).toBe('still here');
    client.destroy();
  });
});
