import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseProxyProtocol } from '../src/protocol/proxy-protocol.js';
import { proxyProtocolFront } from '../src/edge/listeners/proxy-protocol-front.js';
import type { TestDatabase } from './support/stores.js';
import { createAuthtoken, type EdgePorts, startEdgeServer } from './support/edge-listeners.js';
import type { BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { until } from './support/mux.js';

/**
 * Opts.ProxyProto with the unmodified @ngrok/ngrok SDK against a `burrow server` process: the
 * local service reads a PROXY protocol header naming the public client before the client's bytes.
 */

/** What the local service read on one connection: the PROXY header and the bytes after it. */
interface Capture {
  header: Buffer;
  rest: Buffer;
}

/** A local TCP service that records each connection's header and answers with the rest, as JSON. */
async function startCapturingService(): Promise<{
  port: number;
  captures: Capture[];
  close: () => Promise<void>;
}> {
  const captures: Capture[] = [];
  const server = net.createServer((socket) => {
    let got = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      got = Buffer.concat([got, chunk]);
      let header;
      try {
        header = parseProxyProtocol(got);
      } catch (err) {
        socket.end(JSON.stringify({ error: String(err) }));
        return;
      }
      if (header === undefined || got.length === header.length) return;
      socket.off('data', onData);
      const capture = { header: got.subarray(0, header.length), rest: got.subarray(header.length) };
      captures.push(capture);
      socket.end(JSON.stringify({ rest: capture.rest.toString('latin1') }));
    };
    socket.on('data', onData);
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    captures,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function readAll(socket: net.Socket): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'end');
  return Buffer.concat(chunks).toString('utf8');
}

describe('@ngrok/ngrok proxyProto through a burrow server process', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let ports: EdgePorts;
  let session: ngrok.Session;
  let service: Awaited<ReturnType<typeof startCapturingService>>;

  beforeAll(async () => {
    let api;
    let caPem: string;
    ({ db, ports, server, api, caPem } = await startEdgeServer('sqlite'));
    service = await startCapturingService();
    session = await connectNgrok(ports, caPem, await createAuthtoken(api));
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await service?.close();
    await server?.stop(20_000);
    await db?.drop();
  });

  it("tcpEndpoint().proxyProto('1'): the service reads PROXY TCP4 naming the client's port first", async () => {
    const listener = await session
      .tcpEndpoint()
      .proxyProto('1')
      .listenAndForward(`tcp://127.0.0.1:${service.port}`);
    const publicPort = Number(new URL(listener.url()!).port);
    const client = net.connect({ port: publicPort, host: '127.0.0.1', allowHalfOpen: true });
    await once(client, 'connect');
    const clientPort = client.localPort!;
    client.write('hello through ngrok');
    const seen = service.captures.length;
    expect(JSON.parse(await readAll(client))).toEqual({ rest: 'hello through ngrok' });
    expect(service.captures[seen]!.header.toString('latin1')).toBe(
      `PROXY TCP4 127.0.0.1 127.0.0.1 ${clientPort} ${publicPort}\r\n`,
    );
    await listener.close();
  });

  it("tcpEndpoint().proxyProto('2'): a v2 binary header, then the bytes", async () => {
    const listener = await session
      .tcpEndpoint()
      .proxyProto('2')
      .listenAndForward(`tcp://127.0.0.1:${service.port}`);
    const publicPort = Number(new URL(listener.url()!).port);
    const client = net.connect({ port: publicPort, host: '127.0.0.1', allowHalfOpen: true });
    await once(client, 'connect');
    const clientPort = client.localPort!;
    client.write('v2 bytes');
    const seen = service.captures.length;
    expect(JSON.parse(await readAll(client))).toEqual({ rest: 'v2 bytes' });
    const header = service.captures[seen]!.header;
    expect(parseProxyProtocol(header)).toEqual({
      version: 2,
      source: { address: '127.0.0.1', port: clientPort, family: 'IPv4' },
      length: 28,
    });
    expect(header.readUInt16BE(26)).toBe(publicPort);
    await listener.close();
  });

  it("tlsEndpoint().proxyProto('2'): the header comes before the client's ClientHello", async () => {
    const listener = await session
      .tlsEndpoint()
      .proxyProto('2')
      .listenAndForward(`tcp://127.0.0.1:${service.port}`);
    const name = new URL(listener.url()!).hostname;
    const seen = service.captures.length;
    const raw = net.connect({ port: ports.https, host: '127.0.0.1' });
    await once(raw, 'connect');
    const clientPort = raw.localPort!;
    // The service answers with JSON, not TLS: the handshake fails; what the service read counts.
    const client = tls.connect({ socket: raw, servername: name, rejectUnauthorized: false });
    client.on('error', () => undefined);
    await until(() => service.captures.length > seen);
    const { header, rest } = service.captures[seen]!;
    expect(parseProxyProtocol(header)?.source).toEqual({
      address: '127.0.0.1',
      port: clientPort,
      family: 'IPv4',
    });
    expect(header.readUInt16BE(26)).toBe(ports.https);
    // The client's TLS handshake record follows.
    expect(rest[0]).toBe(0x16);
    client.destroy();
    await listener.close();
  });

  it("httpEndpoint().proxyProto('1'): each public connection's requests carry its own client port", async () => {
    // The service reads the header (as behind a balancer) and answers with the client it names.
    const inner = http.createServer((req, res) =>
      res.end(`${req.socket.remoteAddress}:${req.socket.remotePort}`),
    );
    const front = proxyProtocolFront(inner, { timeoutMs: 5000 });
    front.listen(0, '127.0.0.1');
    await once(front, 'listening');
    const servicePort = (front.address() as net.AddressInfo).port;
    const listener = await session
      .httpEndpoint()
      .proxyProto('1')
      .listenAndForward(`http://127.0.0.1:${servicePort}`);
    const host = new URL(listener.url()!).hostname;
    const get = (agent: http.Agent | false): Promise<{ body: string; clientPort: number }> =>
      new Promise((resolve, reject) => {
        const req = http.request(
          { host: '127.0.0.1', port: ports.http, path: '/', headers: { Host: host }, agent },
          (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (c: string) => (body += c));
            res.on('end', () => resolve({ body, clientPort: req.socket!.localPort! }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await get(keepAlive);
      expect(first.body).toBe(`127.0.0.1:${first.clientPort}`);
      // Another connection from the same IP: its own header, not the first connection's stream.
      const other = await get(false);
      expect(other.clientPort).not.toBe(first.clientPort);
      expect(other.body).toBe(`127.0.0.1:${other.clientPort}`);
      const again = await get(keepAlive);
      expect(again.clientPort).toBe(first.clientPort);
      expect(again.body).toBe(`127.0.0.1:${first.clientPort}`);
      const third = await get(false);
      expect(third.body).toBe(`127.0.0.1:${third.clientPort}`);
    } finally {
      keepAlive.destroy();
      await listener.close();
      front.close();
    }
  });
});
