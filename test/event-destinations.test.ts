import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { certificateMaker } from './support/certificates.js';
import { startEchoUpstream } from './support/tcp-upstreams.js';
import { startTlsServer, type TestTlsServer } from './support/tls.js';

/**
 * Issue 33, traffic events out to destinations set in the API: a real `burrow server` (with
 * `--egress-allow 127.0.0.1`, as the receiver is local) sends each request of the run once to a
 * webhook in the test, signed with the secret its create showed, and writes the
 * `tcp_connection_closed.v0` of a TCP connection through an @ngrok/ngrok TCP endpoint to a file
 * as JSON lines; each destination gets only the types its subscription names.
 */

interface WireEvent {
  event_id: string;
  event_type: string;
  object: Record<string, string | number>;
}

async function waitFor(check: () => boolean, ms = 10_000): Promise<void> {
  for (let waited = 0; !check() && waited < ms; waited += 50) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('traffic events to API destinations (webhook, file)', () => {
  let hook: Server;
  const bodies: Array<{ body: string; signature: string }> = [];
  let edge: EdgeServer;
  let web: LocalServer;
  let echo: LocalServer;
  let tlsService: TestTlsServer;
  const certs = certificateMaker();
  let session: ngrok.Session;
  let secret: string;
  let file: string;
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );
  const hookEvents = () => bodies.flatMap((b) => JSON.parse(b.body) as WireEvent[]);
  const fileEvents = () =>
    existsSync(file)
      ? readFileSync(file, 'utf8')
          .trimEnd()
          .split('\n')
          .map((l) => JSON.parse(l) as WireEvent)
      : [];

  beforeAll(async () => {
    hook = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => (body += d));
      req.on('end', () => {
        bodies.push({ body, signature: String(req.headers['x-burrow-signature']) });
        res.writeHead(204).end();
      });
    });
    hook.listen(0, '127.0.0.1');
    await once(hook, 'listening');
    edge = await startEdgeServer('sqlite', ['--egress-allow', '127.0.0.1']);
    file = join(edge.db.dataDir, 'events.jsonl');
    const webhook = await edge.api.post('/event_destinations', {
      target: { webhook: { url: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/e` } },
    });
    expect(webhook.status, webhook.text).toBe(201);
    secret = webhook.body.signing_secret as string;
    const jsonl = await edge.api.post('/event_destinations', { target: { file: { path: file } } });
    expect(jsonl.status, jsonl.text).toBe(201);
    for (const [type, id] of [
      ['http_request_complete.v0', webhook.body.id],
      ['tcp_connection_closed.v0', jsonl.body.id],
    ]) {
      const sub = await edge.api.post('/event_subscriptions', {
        sources: [{ type }],
        destination_ids: [id],
      });
      expect(sub.status, sub.text).toBe(201);
    }
    web = await startHttpUpstream((_req, res) => res.writeHead(200).end('ok'));
    echo = await startEchoUpstream();
    // The service's own certificate: the edge passes the TLS bytes through untouched.
    const cert = certs.make('/CN=service.test', ['subjectAltName=DNS:service.test']);
    tlsService = await startTlsServer({ cert, key: certs.lastKey() });
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await web?.close();
    await echo?.close();
    await tlsService?.close();
    certs.cleanup();
    await edge?.server.stop();
    await edge?.db.drop();
    hook?.close();
  });

  it('posts each request of the run once to the webhook, with a valid signature', async () => {
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    const paths = ['/one', '/two', '/three'];
    for (const path of paths) expect((await curlUrl(listener.url()!, path)).status).toBe(200);
    const mine = () =>
      hookEvents().filter((e) => paths.includes(String(e.object['http.request.url.path'])));
    await waitFor(() => mine().length >= paths.length);
    expect(
      mine()
        .map((e) => e.object['http.request.url.path'])
        .sort(),
    ).toEqual([...paths].sort());
    expect(new Set(mine().map((e) => e.event_id)).size).toBe(paths.length);
    for (const { body, signature } of bodies) {
      expect(signature).toBe(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
    }
    expect(hookEvents().every((e) => e.event_type === 'http_request_complete.v0')).toBe(true);
    await listener.close();
  });

  it('writes a TCP connection as tcp_connection_closed.v0 to the file, and only that', async () => {
    const listener = await session.tcpEndpoint().listenAndForward(`tcp://127.0.0.1:${echo.port}`);
    const publicPort = Number(new URL(listener.url()!).port);
    const client = connect(publicPort, '127.0.0.1');
    await once(client, 'connect');
    const clientPort = client.localPort;
    client.write('hello');
    await once(client.setEncoding('utf8'), 'data');
    client.end();
    await once(client, 'close');
    await waitFor(() => fileEvents().length > 0);
    const events = fileEvents();
    expect(events.map((e) => e.event_type)).toEqual(['tcp_connection_closed.v0']);
    expect(events[0]!.object).toMatchObject({
      'conn.client_ip': '127.0.0.1',
      'conn.client_port': clientPort,
      'conn.server_port': publicPort,
      'conn.bytes_in': 5,
      'conn.bytes_out': 5,
      'endpoint.proto': 'tcp',
      'endpoint.url': listener.url(),
    });
    await listener.close();
  });

  it('writes a TLS passthrough connection as tcp_connection_closed.v0 with proto tls', async () => {
    const listener = await session
      .tlsEndpoint()
      .listenAndForward(`tcp://127.0.0.1:${tlsService.port}`);
    const name = new URL(listener.url()!).hostname;
    const client = tlsConnect({
      port: edge.ports.https,
      host: '127.0.0.1',
      servername: name,
      rejectUnauthorized: false,
    });
    await once(client, 'secureConnect');
    // The service's certificate came through: the edge did not terminate the TLS.
    expect(client.getPeerCertificate().subject.CN).toBe('service.test');
    const clientPort = client.localPort;
    client.resume().end();
    await once(client, 'close');
    const tls = () => fileEvents().filter((e) => e.object['endpoint.proto'] === 'tls');
    await waitFor(() => tls().length > 0);
    expect(tls()).toHaveLength(1);
    const event = tls()[0]!;
    expect(event.event_type).toBe('tcp_connection_closed.v0');
    expect(event.object).toMatchObject({
      'conn.client_port': clientPort,
      'conn.server_port': edge.ports.https,
      'endpoint.url': listener.url(),
    });
    // The handshake both ways: a ClientHello of some hundred bytes in, the certificate out.
    expect(event.object['conn.bytes_in']).toBeGreaterThan(100);
    expect(event.object['conn.bytes_out']).toBeGreaterThan(300);
    await listener.close();
  });
});
