import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
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
import { startEchoUpstream } from './support/tcp-upstreams.js';

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
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await web?.close();
    await echo?.close();
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
});
