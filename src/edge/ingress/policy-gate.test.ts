import { once } from 'node:events';
import { connect, type AddressInfo, type Socket } from 'node:net';
import {
  connect as tlsConnect,
  createServer as createTlsServer,
  type SecureVersion,
} from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyEventLog } from '../../policy/index.js';
import {
  fakeTunnel,
  freePort,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { startEchoUpstream } from '../../../test/support/tcp-upstreams.js';
import { withPolicy } from '../../../test/support/policy.js';

let t: TestIngress;
let echo: LocalServer;
let tlsUpstream: { port: number; close(): void };
const events = new PolicyEventLog();

beforeAll(async () => {
  t = await startTestIngress();
  echo = await startEchoUpstream();
  const issued = await t.ca.issue(['pass.burrow.test']);
  const server = createTlsServer({ cert: issued.certPem, key: issued.keyPem }, (socket) => {
    socket.end(`hello over ${socket.getProtocol()}`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  tlsUpstream = { port: (server.address() as AddressInfo).port, close: () => server.close() };
});

afterAll(async () => {
  await t.close();
  await echo.close();
  tlsUpstream.close();
});

/** Send `text` and read until the connection ends: what came back, or the error it ended with. */
async function exchange(socket: Socket, text: string): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
  socket.end(text);
  await ended;
  return Buffer.concat(chunks).toString();
}

async function tcpEndpoint(policy: string) {
  const port = await freePort();
  const tunnel = withPolicy(
    fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port }),
    policy,
    events,
  );
  t.registry.addTunnel(tunnel);
  await t.ingress.tcp.listening(port);
  return { tunnel, port };
}

describe('on_tcp_connect on TCP endpoints', () => {
  it('closes a denied connection before the agent sees it, and records why', async () => {
    const { tunnel, port } = await tcpEndpoint(`
on_tcp_connect:
  - name: Block loopback
    expressions: ["conn.client_ip == '127.0.0.1' && conn.server_port == endpoint.port"]
    actions: [{type: log, config: {metadata: {message: "bye \${conn.client_ip}"}}}, {type: deny}]`);
    expect(await exchange(connect(port, '127.0.0.1'), 'anyone?')).toBe('');
    expect(tunnel.connects).toHaveLength(0);
    expect(events.eventsFor(tunnel.id).map((e) => e.outcome)).toEqual(['denied', 'log']);
    expect(events.eventsFor(tunnel.id)[1]!.message).toBe('bye 127.0.0.1');
  });

  it('lets allowed clients through (restrict-ips allow)', async () => {
    const { tunnel, port } = await tcpEndpoint(`
inbound:
  - actions: [{type: restrict-ips, config: {allow: [127.0.0.0/8]}}]`);
    expect(await exchange(connect(port, '127.0.0.1'), 'echo me')).toBe('echo me');
    expect(tunnel.connects).toHaveLength(1);
  });
});

describe('on_tcp_connect on TLS endpoints (passthrough)', () => {
  /** A TLS client through the HTTPS port to the passthrough endpoint, capped at `maxVersion`. */
  function tlsExchange(maxVersion: SecureVersion): Promise<string> {
    return new Promise((resolve) => {
      const socket = tlsConnect({
        host: '127.0.0.1',
        port: t.httpsPort,
        servername: 'pass.burrow.test',
        ca: t.ca.certPem,
        maxVersion,
      });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (c: string) => (text += c));
      socket.on('error', (err: NodeJS.ErrnoException) =>
        resolve(`error ${err.code ?? err.message}`),
      );
      socket.on('close', () => resolve(text));
    });
  }

  it('denies TLS 1.3 clients with the TLS sample (offered version from the ClientHello); TLS 1.2 passes', async () => {
    const tunnel = withPolicy(
      fakeTunnel({ proto: 'tls', hostname: 'pass.burrow.test', upstreamPort: tlsUpstream.port }),
      JSON.stringify({
        on_tcp_connect: [
          {
            name: 'AllowTLS1.3',
            expressions: ["conn.tls.version.contains('1.3') && conn.tls.sni == 'pass.burrow.test'"],
            actions: [{ type: 'deny' }],
          },
        ],
      }),
      events,
    );
    t.registry.addTunnel(tunnel);
    expect(await tlsExchange('TLSv1.3')).toMatch(/^error (ECONNRESET|.*socket disconnected)/);
    expect(tunnel.connects).toHaveLength(0);
    expect(await tlsExchange('TLSv1.2')).toBe('hello over TLSv1.2');
    expect(tunnel.connects).toHaveLength(1);
    t.registry.removeTunnel(tunnel.id);
  });
});
