import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect as netConnect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Session } from '../src/sdk/index.js';
import { certificateMaker } from './support/certificates.js';
import { clientPki } from './support/client-certificates.js';
import {
  startEchoServer,
  startTlsEchoServer,
  tcpExchange,
  tlsExchange,
  TLS_SAMPLE,
  type Exchange,
} from './support/edge-traffic.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { CurlApi, type CurlReply } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  type EdgePorts,
} from './support/edge-listeners.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { freePortRange } from './support/port-range.js';

/**
 * TCP and TLS edges end to end: a real `burrow server --role all`, agents from @ngrok/ngrok and
 * from our SDK attached by labels, the management API driven with curl, and public clients on
 * plain sockets. Everything an edge does is set up through the API and seen on live traffic.
 */

/** Ports for `--tcp-ports`: above the default 20000-20999 other tests' servers use. */
const TCP_PORT_REGION = { from: 21_000, to: 32_000 };

/** Probe until `ok` (the edge applies API writes at once, by change events). */
async function eventually(
  probe: () => Promise<Exchange>,
  ok: (e: Exchange) => boolean,
  ms = 6000,
): Promise<Exchange> {
  const deadline = Date.now() + ms;
  for (;;) {
    const seen = await probe();
    if (ok(seen) || Date.now() > deadline) return seen;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(DATABASE_KINDS)('TCP and TLS edges on live traffic (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caFile: string;
  const sessions: Session[] = [];
  const ngrokSessions: ngrok.Session[] = [];
  const closers: Array<() => Promise<void>> = [];

  const ok = (res: CurlReply, status = 200): CurlReply => {
    expect(res.status, res.text).toBe(status);
    return res;
  };
  const token = (): Promise<string> => createAuthtoken(api, { description: 'edge agent' });
  const sdkSession = async (): Promise<Session> => {
    const session = await connect({
      serverAddr: `127.0.0.1:${ports.agent}`,
      authtoken: await token(),
      ca: caFile,
    });
    sessions.push(session);
    return session;
  };
  const tcpPort = (addr: string) => Number(addr.slice(addr.lastIndexOf(':') + 1));
  const tunnelIds = async (backendId: string): Promise<string[]> =>
    (ok(await api.get(`/backends/tunnel_group/${backendId}`)).body.tunnels as { id: string }[])
      .map((t) => t.id)
      .sort();

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    ports = await freeEdgePorts();
    const tcpFirst = await freePortRange(3, TCP_PORT_REGION);
    caFile = join(db.dataDir, 'ca.pem');
    server = await startBurrowServer(db, {
      args: [...edgeServerArgs(ports), '--tcp-ports', `${tcpFirst}-${tcpFirst + 2}`],
    });
    api = new CurlApi(server.url, await createApiKey(db));
  }, 60_000);
  afterAll(async () => {
    for (const s of ngrokSessions) await s.close().catch(() => undefined);
    for (const s of sessions) await s.close();
    for (const close of closers) await close();
    await server?.stop();
    await db?.drop();
  });

  it('serves a TCP edge from two labeled agents, with balancing, restrictions and moves', async () => {
    const [ngrokEcho, sdkEcho] = [await startEchoServer('ngrok'), await startEchoServer('sdk')];
    closers.push(
      () => ngrokEcho.close(),
      () => sdkEcho.close(),
    );
    const addr = ok(await api.post('/reserved_addrs', { description: 'edge' }), 201).body
      .addr as string;
    const edge = ok(await api.post('/edges/tcp', { description: 'live tcp edge' }), 201).body;
    const backend = ok(
      await api.post('/backends/tunnel_group', { labels: { edge: edge.id } }),
      201,
    ).body;
    ok(
      await api.patch(`/edges/tcp/${edge.id}`, {
        hostports: [addr],
        backend: { backend_id: backend.id },
      }),
    );

    const ngrokSession = await connectNgrok(ports, readFileSync(caFile), await token());
    ngrokSessions.push(ngrokSession);
    const ngrokListener = await ngrokSession
      .labeledListener()
      .label('edge', edge.id)
      .listenAndForward(`tcp://127.0.0.1:${ngrokEcho.port}`);
    const sdkTunnel = await (
      await sdkSession()
    ).labeledTunnel({ labels: { edge: edge.id }, forward: sdkEcho.port });
    expect(await tunnelIds(backend.id)).toEqual([ngrokListener.id(), sdkTunnel.id].sort());
    const listed = ok(await api.get('/tunnels')).body.tunnels as Array<Record<string, unknown>>;
    expect(listed.find((t) => t.id === sdkTunnel.id)).toMatchObject({
      labels: { edge: edge.id },
      backends: [{ id: backend.id, uri: backend.uri }],
    });
    expect(listed.find((t) => t.id === ngrokListener.id())).toMatchObject({
      labels: { edge: edge.id },
      backends: [{ id: backend.id }],
    });

    const port = tcpPort(addr);
    expect(
      (
        await eventually(
          () => tcpExchange(port),
          (e) => e.served,
        )
      ).served,
    ).toBe(true);
    const answers: string[] = [];
    for (let i = 0; i < 6; i++) answers.push((await tcpExchange(port)).text);
    expect(new Set(answers)).toEqual(new Set(['ngrok:ping', 'sdk:ping']));
    answers.slice(1).forEach((answer, i) => expect(answer).not.toBe(answers[i]));

    await ngrokListener.close();
    expect(await tunnelIds(backend.id)).toEqual([sdkTunnel.id]);
    for (let i = 0; i < 4; i++) expect((await tcpExchange(port)).text).toBe('sdk:ping');

    const policy = ok(await api.post('/ip_policies', { description: 'loopback' }), 201).body;
    const rule = { ip_policy_id: policy.id, cidr: '0.0.0.0/0', action: 'allow' };
    ok(await api.post('/ip_policy_rules', rule), 201);
    ok(await api.put(`/edges/tcp/${edge.id}/ip_restriction`, { ip_policy_ids: [policy.id] }));
    expect((await tcpExchange(port)).text).toBe('sdk:ping');
    const deny = { ip_policy_id: policy.id, cidr: '127.0.0.1/32', action: 'deny' };
    ok(await api.post('/ip_policy_rules', deny), 201);
    // A new rule names its IP policy: the edges that use it reload at once.
    const refused = await eventually(
      () => tcpExchange(port),
      (e) => !e.served,
    );
    expect(refused).toMatchObject({ served: false, text: '' });
    ok(await api.delete(`/edges/tcp/${edge.id}/ip_restriction`), 204);
    expect(
      (
        await eventually(
          () => tcpExchange(port),
          (e) => e.served,
        )
      ).text,
    ).toBe('sdk:ping');

    const moved = ok(await api.post('/reserved_addrs', { description: 'moved' }), 201).body
      .addr as string;
    ok(await api.patch(`/edges/tcp/${edge.id}`, { hostports: [moved] }));
    const there = await eventually(
      () => tcpExchange(tcpPort(moved)),
      (e) => e.served,
    );
    expect(there.text).toBe('sdk:ping');
    expect((await tcpExchange(port)).error).toBe('ECONNREFUSED');

    ok(await api.delete(`/edges/tcp/${edge.id}`), 204);
    const gone = await eventually(
      () => tcpExchange(tcpPort(moved)),
      (e) => e.error === 'ECONNREFUSED',
    );
    expect(gone.error).toBe('ECONNREFUSED');
  });

  it('serves a TLS edge: passthrough, policies, termination with min_version, mutual TLS', async () => {
    const certs = certificateMaker();
    const pki = clientPki('Live Client CA');
    closers.push(
      async () => certs.cleanup(),
      async () => pki.cleanup(),
    );
    const upstreamCert = certs.make('/CN=upstream.edges.test', []);
    const tlsEcho = await startTlsEchoServer('upstream', {
      certPem: upstreamCert,
      keyPem: certs.lastKey(),
    });
    const plainEcho = await startEchoServer('plain');
    // The agent's service: TLS connections (passthrough) to the TLS echo, plaintext to the other.
    const service = createServer({ allowHalfOpen: true }, (socket: Socket) => {
      socket.once('data', (first: Buffer) => {
        socket.pause();
        socket.unshift(first);
        const target = first[0] === 0x16 ? tlsEcho.port : plainEcho.port;
        const out = netConnect({ port: target, host: '127.0.0.1', allowHalfOpen: true }, () => {
          socket.pipe(out);
          out.pipe(socket);
        });
        out.on('error', () => socket.destroy());
        socket.on('error', () => out.destroy());
      });
    });
    service.listen(0, '127.0.0.1');
    await once(service, 'listening');
    closers.push(
      () => tlsEcho.close(),
      () => plainEcho.close(),
      () => new Promise<void>((resolve) => service.close(() => resolve())),
    );

    const name = `app-${kind}.edges.example.com`;
    ok(await api.post('/reserved_domains', { domain: name }), 201);
    const edge = ok(
      await api.post('/edges/tls', { hostports: [`${name}:${ports.https}`] }),
      201,
    ).body;
    const backend = ok(
      await api.post('/backends/tunnel_group', { labels: { edge: edge.id } }),
      201,
    ).body;
    ok(await api.put(`/edges/tls/${edge.id}/backend`, { backend_id: backend.id }));
    const tunnel = await (
      await sdkSession()
    ).labeledTunnel({
      labels: { edge: edge.id },
      forward: (service.address() as AddressInfo).port,
    });
    const hello = (extra: Partial<Parameters<typeof tlsExchange>[0]> = {}) =>
      tlsExchange({ port: ports.https, servername: name, ...extra });

    const through = await eventually(hello, (e) => e.served);
    expect(through).toMatchObject({ text: 'upstream:ping', peerCn: 'upstream.edges.test' });

    ok(await api.put(`/edges/tls/${edge.id}/traffic_policy`, { value: TLS_SAMPLE }));
    expect(
      (
        await eventually(
          () => hello({ minVersion: 'TLSv1.3' }),
          (e) => !e.served,
        )
      ).served,
    ).toBe(false);
    expect((await hello({ maxVersion: 'TLSv1.2' })).text).toBe('upstream:ping');
    const events = ok(await api.get(`/edges/tls/${edge.id}/traffic_policy/events`)).body.events;
    expect(events.slice(0, 2)).toMatchObject([
      { outcome: 'denied', owner_id: edge.id },
      { outcome: 'log', metadata: { message: 'Invalid TLS Version' } },
    ]);

    // A PATCH swaps the policy under the same, still connected agent.
    const onlyTls13 = JSON.stringify({
      on_tcp_connect: [{ expressions: ["conn.tls.version != '1.3'"], actions: [{ type: 'deny' }] }],
    });
    ok(await api.patch(`/edges/tls/${edge.id}`, { traffic_policy: { value: onlyTls13 } }));
    const swapped = await eventually(
      () => hello({ maxVersion: 'TLSv1.2' }),
      (e) => !e.served,
    );
    expect(swapped.served).toBe(false);
    expect((await hello({ minVersion: 'TLSv1.3' })).text).toBe('upstream:ping');
    expect(await tunnelIds(backend.id)).toEqual([tunnel.id]);
    ok(await api.delete(`/edges/tls/${edge.id}/traffic_policy`), 204);

    ok(
      await api.put(`/edges/tls/${edge.id}/tls_termination`, {
        terminate_at: 'edge',
        min_version: '1.3',
      }),
    );
    const ca = readFileSync(caFile, 'utf8');
    const terminated = await eventually(
      () => hello({ ca }),
      (e) => e.text === 'plain:ping',
    );
    expect(terminated).toMatchObject({ text: 'plain:ping', authorized: true, protocol: 'TLSv1.3' });
    expect((await hello({ ca, maxVersion: 'TLSv1.2' })).served).toBe(false);

    const authority = ok(
      await api.post('/certificate_authorities', { ca_pem: pki.ca.certPem }),
      201,
    ).body;
    ok(
      await api.put(`/edges/tls/${edge.id}/mutual_tls`, {
        certificate_authority_ids: [authority.id],
      }),
    );
    expect(
      (
        await eventually(
          () => hello({ ca }),
          (e) => !e.served,
        )
      ).served,
    ).toBe(false);
    expect((await hello({ ca, cert: pki.issue('device-1') })).text).toBe('plain:ping');
  });
});
