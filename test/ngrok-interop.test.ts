import http from 'node:http';
import type { AddressInfo } from 'node:net';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusalOf } from './support/ngrok-agents.js';
import type { OnlineTunnel } from '../src/edge/registry/tunnel-registry.js';
import { startTestAgentEdge, type TestAgentEdge } from './support/agent-edge.js';
import { edgeFixtures } from './support/edge-fixtures.js';
import { readAll, until } from './support/mux.js';
import { DATABASE_KINDS } from './support/stores.js';

/**
 * The unmodified @ngrok/ngrok package (ngrok-rust inside) against Burrow's agent listener: if it
 * connects, binds, proxies, resumes and reads our refusals, our side of the protocol is right.
 */

/** Send one HTTP/1.1 request through a tunnel, as the ingress would, and return the reply. */
async function request(tunnel: OnlineTunnel, path: string): Promise<string> {
  const stream = await tunnel.connect({
    clientAddr: '203.0.113.9:40000',
    proto: 'https',
    edgeType: '',
    passthroughTls: false,
  });
  stream.end(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  return String(await readAll(stream));
}

describe.each(DATABASE_KINDS)('@ngrok/ngrok against the agent listener (%s)', (kind) => {
  let edge: TestAgentEdge;
  let upstream: http.Server;
  let upstreamAddr: string;
  let reservedAddr: string;
  const sessions: ngrok.Session[] = [];
  const builder = (token: string) =>
    new ngrok.SessionBuilder()
      .serverAddr(edge.serverAddr)
      .caCert(Buffer.from(edge.caPem))
      .authtoken(token);
  const connect = async (token: string) => {
    const session = await builder(token).connect();
    sessions.push(session);
    return session;
  };
  const tunnelAt = (url: string | null) => edge.registry.listTunnels().find((t) => t.url === url);

  beforeAll(async () => {
    edge = await startTestAgentEdge(kind);
    const fx = edgeFixtures(edge.store);
    await fx.reservedDomain('*.sitea.example.com');
    reservedAddr = (await fx.reservedAddr()).addr;
    upstream = http.createServer((req, res) => res.end(`hello from ${req.url}`));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamAddr = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    // First, while every listener's session is up: closes them all and forward()'s shared session.
    await ngrok.disconnect();
    for (const s of sessions) await s.close().catch(() => undefined);
    upstream.close();
    await edge.close();
  });

  it('connects, binds a random https URL and serves a request through it', async () => {
    const session = await connect(await edge.token());
    const listener = await session.httpEndpoint().listenAndForward(`http://${upstreamAddr}`);
    expect(listener.url()).toMatch(/^https:\/\/[a-z0-9]{10}\.burrow\.test:8443$/);
    const tunnel = tunnelAt(listener.url())!;
    expect(tunnel.bindId).toBe(listener.id());
    const session0 = edge.registry.session(tunnel.sessionId)!;
    expect(session0).toMatchObject({ transport: 'ngrok/2', os: 'linux' });
    expect(await request(tunnel, '/hello')).toMatch(/^HTTP\/1\.1 200[\s\S]*hello from \/hello$/);
    await listener.close();
    expect(edge.registry.tunnel(tunnel.id)).toBeUndefined();
  });

  it('forward() with server_addr and session_ca_cert binds a name under a reserved wildcard', async () => {
    const listener = await ngrok.forward({
      addr: upstreamAddr,
      authtoken: await edge.token({ acl: ['bind:*.sitea.example.com'] }),
      server_addr: edge.serverAddr,
      session_ca_cert: edge.caPem,
      domain: 'dev1.sitea.example.com',
      // forward() keeps one session per process; this test's edge is new.
      force_new_session: true,
    });
    expect(listener.url()).toBe('https://dev1.sitea.example.com:8443');
    expect(await request(tunnelAt(listener.url())!, '/fw')).toMatch(/hello from \/fw$/);
    await ngrok.disconnect(listener.url());
  });

  it('binds a reserved TCP address and a random port', async () => {
    const session = await connect(await edge.token());
    const reserved = await session.tcpEndpoint().remoteAddr(reservedAddr).listen();
    expect(reserved.url()).toBe(`tcp://${reservedAddr}`);
    const random = await session.tcpEndpoint().listen();
    expect(random.url()).toMatch(/^tcp:\/\/tcp\.burrow\.test:20\d{3}$/);
    expect(tunnelAt(random.url())?.proto).toBe('tcp');
  });

  it('surfaces refusals with their errorCode', async () => {
    const revoked = `${'A'.repeat(27)}_${'b'.repeat(32)}`;
    expect((await refusalOf(builder('garbage').connect())).errorCode).toBe('ERR_NGROK_105');
    expect((await refusalOf(builder(revoked).connect())).errorCode).toBe('ERR_NGROK_107');
    const bot = await edge.repos.botUsers.create({ name: `off-${kind}`, active: false });
    const inactive = await refusalOf(builder(await edge.token({ owner_id: bot.id })).connect());
    expect(inactive.errorCode).toBe('ERR_NGROK_636');

    const confined = await connect(await edge.token({ acl: ['bind:*.sitea.example.com'] }));
    const acl = await refusalOf(confined.httpEndpoint().domain('app.example.com').listen());
    expect(acl.errorCode).toBe('ERR_NGROK_316');
    const open = await connect(await edge.token());
    const notReserved = await refusalOf(open.httpEndpoint().domain('x.example.org').listen());
    expect(notReserved.errorCode).toBe('ERR_NGROK_319');
    const mtls = await refusalOf(open.httpEndpoint().mutualTlsca(Buffer.from('not a CA')).listen());
    expect(mtls.message).toMatch(/MutualTLSCA is not supported/);
    const policy = await refusalOf(
      open
        .httpEndpoint()
        .trafficPolicy('{"on_http_request":[{"actions":[{"type":"teleport"}]}]}')
        .listen(),
    );
    expect(policy.errorCode).toBe('ERR_NGROK_2201');
    expect(policy.message).toMatch(/TrafficPolicy: phase on_http_request, rule 0/);
    const accepted = await open.httpEndpoint().trafficPolicy('{"on_http_request":[]}').listen();
    expect(tunnelAt(accepted.url())?.trafficPolicy).toBe('{"on_http_request":[]}');
  });

  it('reconnects after the edge cuts the connection, with the same URLs', async () => {
    const session = await connect(await edge.token());
    const web = await session.httpEndpoint().listenAndForward(`http://${upstreamAddr}`);
    const tcp = await session.tcpEndpoint().listen();
    const before = tunnelAt(web.url())!;
    const live = edge.listener.sessions().find((s) => s.id === before.sessionId)!;
    live.mux.destroy(); // the edge-side socket, cut
    await until(() => {
      const t = tunnelAt(web.url());
      return (
        t !== undefined && t.sessionId !== before.sessionId && tunnelAt(tcp.url()) !== undefined
      );
    }, 10_000);
    const after = tunnelAt(web.url())!;
    expect(tunnelAt(tcp.url())!.sessionId).toBe(after.sessionId);
    expect(edge.registry.session(before.sessionId)).toBeUndefined();
    expect(await request(after, '/again')).toMatch(/hello from \/again$/);
  });

  it("delivers the API's Stop command to the agent's handler", async () => {
    let stopped = false;
    const session = await builder(await edge.token())
      .handleStopCommand(() => {
        stopped = true;
      })
      .connect();
    sessions.push(session);
    const listener = await session.httpEndpoint().listen();
    await edge.registry.session(tunnelAt(listener.url())!.sessionId)!.stop();
    await until(() => stopped);
  });

  it('starts labeled tunnels that edges can route to', async () => {
    const session = await connect(await edge.token({ acl: ['bind:edge=*'] }));
    const listener = await session.labeledListener().label('edge', `edghts_${kind}`).listen();
    expect(edge.registry.matchingLabels({ edge: `edghts_${kind}` })).toMatchObject([
      { bindId: listener.id(), labels: { edge: `edghts_${kind}` }, url: undefined },
    ]);
  });
});
