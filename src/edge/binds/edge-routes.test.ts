import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PolicyEventLog } from '../../policy/index.js';
import { openStore, type Repositories, type Store } from '../../store/index.js';
import { createTestRepositories, TEST_STORE_SETTINGS } from '../../../test/support/api.js';
import { certificateMaker } from '../../../test/support/certificates.js';
import { clientPki } from '../../../test/support/client-certificates.js';
import { edgeFixtures } from '../../../test/support/edge-fixtures.js';
import {
  labeledFake,
  startEchoServer,
  startTlsEchoServer,
  tcpExchange,
  tlsExchange,
  TLS_SAMPLE,
  type EchoServer,
  type LabeledFake,
} from '../../../test/support/edge-traffic.js';
import {
  fakeTunnel,
  freePort,
  metricValue,
  startTestIngress,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { until } from '../../../test/support/mux.js';
import {
  createTestDatabase,
  DATABASE_KINDS,
  type TestDatabase,
} from '../../../test/support/stores.js';
import { CertificateStore, LocalCa } from '../certificates/certificates.js';
import { EdgeRoutes } from './edge-routes.js';
import { TunnelConflictError, TunnelRegistry } from '../registry/tunnel-registry.js';

describe.each(DATABASE_KINDS)('TCP and TLS edges as routes of the registry (%s)', (kind) => {
  let db: TestDatabase;
  let store: Store;
  let repos: Repositories;
  let registry: TunnelRegistry;
  let runtime: EdgeRoutes;
  let events: PolicyEventLog;
  let ingress: TestIngress;
  let ca: LocalCa;
  let caDir: string;
  const upstreams: EchoServer[] = [];
  const tunnels: LabeledFake[] = [];
  let a: EchoServer;
  let b: EchoServer;
  let tlsUpstream: EchoServer;
  const certs = certificateMaker();
  const pki = clientPki('Edge Test Client CA');

  /** A reserved address on a port that is free now (rows only: the runtime needs the port). */
  const reserveAddr = async (): Promise<string> =>
    (await edgeFixtures(store).reservedAddr(await freePort())).addr;
  const reserveDomain = async (domain: string): Promise<void> => {
    await edgeFixtures(store).reservedDomain(domain);
  };
  const portOf = (addr: string) => Number(addr.split(':')[1]);
  const online = (labels: Record<string, string>, upstream: () => EchoServer): LabeledFake => {
    const tunnel = labeledFake(labels, (info) =>
      info.passthroughTls ? tlsUpstream.port : upstream().port,
    );
    registry.addTunnel(tunnel);
    tunnels.push(tunnel);
    return tunnel;
  };
  const served = async (port: number) => (await tcpExchange(port)).text;
  /** Until the ingress listens on the hostport `addr` names (a route of the registry now). */
  const listening = async (addr: string): Promise<void> => {
    await until(() => ingress.ingress.tcp.ports.includes(portOf(addr)));
    await ingress.ingress.tcp.listening(portOf(addr));
  };
  const notListening = (addr: string): Promise<void> =>
    until(() => !ingress.ingress.tcp.ports.includes(portOf(addr)));

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await openStore({ database: db.database, dataDir: db.dataDir });
    repos = createTestRepositories(store);
    registry = new TunnelRegistry();
    events = new PolicyEventLog();
    caDir = mkdtempSync(join(tmpdir(), 'burrow-edge-ca-'));
    ca = await LocalCa.loadOrCreate(caDir);
    runtime = new EdgeRoutes({
      repos,
      registry,
      policyEvents: events,
      syncIntervalMs: 100,
      random: () => 0,
    });
    await runtime.start();
    // TLS edges that terminate serve certificates of this test's CA.
    const certificates = new CertificateStore({ ca, nameAllowed: () => true });
    ingress = await startTestIngress({ registry, certificates });
    a = await startEchoServer('a');
    b = await startEchoServer('b');
    const cert = certs.make('/CN=upstream.test', ['subjectAltName=DNS:upstream.test']);
    tlsUpstream = await startTlsEchoServer('tls-upstream', {
      certPem: cert,
      keyPem: certs.lastKey(),
    });
    upstreams.push(a, b, tlsUpstream);
  });
  afterEach(() => {
    for (const t of tunnels.splice(0)) registry.removeTunnel(t.id);
  });
  afterAll(async () => {
    runtime?.close();
    await ingress?.close();
    for (const u of upstreams) await u.close();
    certs.cleanup();
    pki.cleanup();
    rmSync(caDir, { recursive: true, force: true });
    await store?.close();
    await db?.drop();
  });

  it("applies this process's edge writes at once, without waiting for a periodic reload", async () => {
    // A registry of its own: two route sources for the same edges would take turns in one.
    const own = new TunnelRegistry();
    const quiet = new EdgeRoutes({ repos, registry: own, syncIntervalMs: 3_600_000 });
    await quiet.start();
    try {
      const name = `now-${kind}.example.com`;
      await reserveDomain(name);
      const edge = await repos.edges.create('tls', {
        hostports: [`${name}:${TEST_STORE_SETTINGS.httpsPort}`],
      });
      await until(() => own.byHost(name)?.edge?.id === edge.id, 1000);
      expect(own.byHost(name)).toMatchObject({
        proto: 'tls',
        url: `tls://${name}:${TEST_STORE_SETTINGS.httpsPort}`,
      });
      expect(own.byHost(`www.${name}`)).toBeUndefined();
      await repos.edges.delete('tls', edge.id);
      await until(() => own.byHost(name) === undefined, 1000);
    } finally {
      quiet.close();
    }
  });

  it('listens on a hostport once the edge has it, moves it with PATCH and stops on DELETE', async () => {
    const [first, second] = [await reserveAddr(), await reserveAddr()];
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'hp' } });
    online({ edge: 'hp' }, () => a);
    const edge = await repos.edges.create('tcp', {
      hostports: [first],
      backend: { backend_id: backend.id },
    });
    await listening(first);
    expect(await served(portOf(first))).toBe('a:ping');

    await repos.edges.update('tcp', edge.id, { hostports: [second] });
    await listening(second);
    expect(await served(portOf(second))).toBe('a:ping');
    expect((await tcpExchange(portOf(first))).error).toBe('ECONNREFUSED');

    await repos.edges.delete('tcp', edge.id);
    await notListening(second);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await tcpExchange(portOf(second))).error).toBe('ECONNREFUSED');
  });

  it('balances per connection over every tunnel whose labels are a superset of the selector', async () => {
    const addr = await reserveAddr();
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'rr' } });
    const ta = online({ edge: 'rr', color: 'blue' }, () => a);
    const tb = online({ edge: 'rr' }, () => b);
    const other = online({ edge: 'other' }, () => a);
    await repos.edges.create('tcp', { hostports: [addr], backend: { backend_id: backend.id } });
    await listening(addr);

    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await served(portOf(addr)));
    expect(answers).toEqual(['a:ping', 'b:ping', 'a:ping', 'b:ping']);
    expect(other.connects).toEqual([]);
    expect(ta.connects[0]).toMatchObject({ proto: 'tcp', edgeType: '1', passthroughTls: false });
    expect(ta.connects[0]!.clientAddr).toMatch(/^127\.0\.0\.1:\d+$/);

    registry.removeTunnel(ta.id);
    for (let i = 0; i < 3; i++) expect(await served(portOf(addr))).toBe('b:ping');
    registry.removeTunnel(tb.id);
    const started = Date.now();
    const refused = await tcpExchange(portOf(addr));
    expect(refused.served).toBe(false);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('applies ip_restriction rules, and a disabled module lets everyone through', async () => {
    const addr = await reserveAddr();
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'ip' } });
    online({ edge: 'ip' }, () => a);
    const policy = await repos.ipPolicies.create({ description: 'loopback' });
    await repos.ipPolicyRules.create({
      ip_policy_id: policy.id,
      cidr: '0.0.0.0/0',
      action: 'allow',
    });
    const edge = await repos.edges.create('tcp', {
      hostports: [addr],
      backend: { backend_id: backend.id },
      ip_restriction: { ip_policy_ids: [policy.id] },
    });
    await listening(addr);
    expect(await served(portOf(addr))).toBe('a:ping');

    // Rules are not edges: their change arrives with the next periodic reload.
    await repos.ipPolicyRules.create({
      ip_policy_id: policy.id,
      cidr: '127.0.0.1/32',
      action: 'deny',
    });
    await runtime.sync();
    expect((await tcpExchange(portOf(addr))).served).toBe(false);

    await repos.edges.setModule('tcp', edge.id, 'ip_restriction', {
      enabled: false,
      ip_policy_ids: [policy.id],
    });
    await runtime.sync();
    expect(await served(portOf(addr))).toBe('a:ping');
  });

  it('runs the traffic policy at connect time and takes a new policy on the next connection', async () => {
    const addr = await reserveAddr();
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'tp' } });
    const tunnel = online({ edge: 'tp' }, () => a);
    const edge = await repos.edges.create('tcp', {
      hostports: [addr],
      backend: { backend_id: backend.id },
      traffic_policy: {
        value: JSON.stringify({
          on_tcp_connect: [
            {
              name: 'Block loopback',
              expressions: ["conn.client_ip == '127.0.0.1' && endpoint.protocol == 'tcp'"],
              actions: [{ type: 'deny' }],
            },
          ],
        }),
      },
    });
    await listening(addr);
    expect((await tcpExchange(portOf(addr))).served).toBe(false);
    expect(tunnel.connects).toEqual([]);
    expect(events.eventsFor(edge.id)[0]).toMatchObject({
      owner_id: edge.id,
      outcome: 'denied',
      client_ip: '127.0.0.1',
    });

    await repos.edges.setModule('tcp', edge.id, 'traffic_policy', {
      value:
        'on_tcp_connect:\n  - expressions: ["conn.client_ip == \'192.0.2.1\'"]\n    actions: [{type: deny}]\n',
    });
    await runtime.sync();
    expect(await served(portOf(addr))).toBe('a:ping');
    expect(registry.tunnel(tunnel.id)).toBe(tunnel);
  });

  it('picks up what another process wrote on its periodic reload', async () => {
    const other = await openStore({ database: db.database, dataDir: db.dataDir });
    try {
      const otherRepos = createTestRepositories(other);
      const addr = await reserveAddr();
      const backend = await otherRepos.backends.tunnelGroups.create({ labels: { edge: 'far' } });
      online({ edge: 'far' }, () => b);
      const edge = await otherRepos.edges.create('tcp', {
        hostports: [addr],
        backend: { backend_id: backend.id },
      });
      await listening(addr);
      expect(await served(portOf(addr))).toBe('b:ping');
      await otherRepos.edges.delete('tcp', edge.id);
      await notListening(addr);
    } finally {
      await other.close();
    }
  });

  it('routes failover, weighted and static backends', async () => {
    const addr = await reserveAddr();
    const empty = await repos.backends.tunnelGroups.create({ labels: { edge: 'nobody' } });
    const ga = await repos.backends.tunnelGroups.create({ labels: { edge: 'ga' } });
    const gb = await repos.backends.tunnelGroups.create({ labels: { edge: 'gb' } });
    online({ edge: 'ga' }, () => a);
    online({ edge: 'gb' }, () => b);
    const failover = await repos.backends.failovers.create({ backends: [empty.id, gb.id, ga.id] });
    const edge = await repos.edges.create('tcp', {
      hostports: [addr],
      backend: { backend_id: failover.id },
    });
    await listening(addr);
    expect(await served(portOf(addr))).toBe('b:ping');

    // random() is pinned to 0: the first member with weight > 0 wins; weight 0 never does.
    const weighted = await repos.backends.weighted.create({ backends: { [ga.id]: 0, [gb.id]: 5 } });
    await repos.edges.setModule('tcp', edge.id, 'backend', { backend_id: weighted.id });
    await runtime.sync();
    for (let i = 0; i < 3; i++) expect(await served(portOf(addr))).toBe('b:ping');

    const plain = await repos.backends.statics.create({ address: `127.0.0.1:${a.port}` });
    await repos.edges.setModule('tcp', edge.id, 'backend', { backend_id: plain.id });
    await runtime.sync();
    expect(await served(portOf(addr))).toBe('a:ping');

    const overTls = await repos.backends.statics.create({
      address: `127.0.0.1:${tlsUpstream.port}`,
      tls: { enabled: true },
    });
    await repos.edges.setModule('tcp', edge.id, 'backend', { backend_id: overTls.id });
    await runtime.sync();
    expect(await served(portOf(addr))).toBe('tls-upstream:ping');
  });

  it("shares one name and port space with agents' endpoints: first holder keeps it", async () => {
    const addr = await reserveAddr();
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'space' } });
    online({ edge: 'space' }, () => a);
    // An agent's TCP endpoint holds the port first: the edge waits for it, and says so.
    const agent = fakeTunnel({ proto: 'tcp', port: portOf(addr), upstreamPort: b.port });
    registry.addTunnel(agent);
    try {
      await ingress.ingress.tcp.listening(portOf(addr));
      const edge = await repos.edges.create('tcp', {
        hostports: [addr],
        backend: { backend_id: backend.id },
      });
      await runtime.sync();
      expect(await served(portOf(addr))).toBe('b:ping');
      expect(registry.byPort(portOf(addr))).toBe(agent);

      // Once the agent goes, the next reload routes the port to the edge, with no new listener.
      registry.removeTunnel(agent.id);
      await runtime.sync();
      expect(registry.byPort(portOf(addr))?.edge).toEqual({ id: edge.id, type: 'tcp' });
      await listening(addr);
      expect(await served(portOf(addr))).toBe('a:ping');

      // Now the edge holds it: an agent asking for the port is refused.
      const late = fakeTunnel({ proto: 'tcp', port: portOf(addr), upstreamPort: b.port });
      expect(() => registry.addTunnel(late)).toThrow(TunnelConflictError);
      expect(() => registry.addTunnel(late)).toThrow(`of TCP edge ${edge.id}`);
      await repos.edges.delete('tcp', edge.id);
    } finally {
      if (registry.tunnel(agent.id)) registry.removeTunnel(agent.id);
    }
  });

  it('meters an edge hostport like an endpoint, under its URL, across changes of the edge', async () => {
    const addr = await reserveAddr();
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'meter' } });
    online({ edge: 'meter' }, () => a);
    const edge = await repos.edges.create('tcp', {
      hostports: [addr],
      backend: { backend_id: backend.id },
    });
    await listening(addr);
    const endpoint = `tcp://${addr}`;
    const before = metricValue(ingress.metrics, 'burrow_connections_total', { endpoint });
    expect(await served(portOf(addr))).toBe('a:ping');
    expect(await served(portOf(addr))).toBe('a:ping');
    expect(metricValue(ingress.metrics, 'burrow_connections_total', { endpoint })).toBe(before + 2);
    // A changed edge gets new routes; its series go on counting where they were.
    await repos.edges.setModule('tcp', edge.id, 'traffic_policy', {
      value: 'on_tcp_connect: [{actions: [{type: log}]}]',
    });
    await runtime.sync();
    await new Promise((resolve) => setImmediate(resolve));
    expect(await served(portOf(addr))).toBe('a:ping');
    expect(metricValue(ingress.metrics, 'burrow_connections_total', { endpoint })).toBe(before + 3);
    await repos.edges.delete('tcp', edge.id);
  });

  it("runs every on_tcp_connect action an endpoint's policy can: forward-internal from an edge", async () => {
    const addr = await reserveAddr();
    const internal = {
      ...fakeTunnel({ proto: 'tcp', upstreamPort: b.port }),
      port: undefined,
      internal: `db-${kind}.internal:5432`,
    };
    registry.addTunnel(internal);
    try {
      // No backend at all: the policy alone decides where the connection goes.
      const edge = await repos.edges.create('tcp', {
        hostports: [addr],
        traffic_policy: {
          value: JSON.stringify({
            on_tcp_connect: [
              {
                actions: [
                  { type: 'forward-internal', config: { url: `tcp://${internal.internal}` } },
                ],
              },
            ],
          }),
        },
      });
      await listening(addr);
      expect(await served(portOf(addr))).toBe('b:ping');
      expect(internal.connects).toHaveLength(1);

      // The internal endpoint gone: on_error continue falls back to the backend, of which there
      // is none, so the connection is closed, never left hanging.
      registry.removeTunnel(internal.id);
      const refused = await tcpExchange(portOf(addr));
      expect(refused.served).toBe(false);
      await repos.edges.delete('tcp', edge.id);
    } finally {
      if (registry.tunnel(internal.id)) registry.removeTunnel(internal.id);
    }
  });

  it('refuses every connection of an edge whose stored policy cannot run, never lets it through', async () => {
    const addr = await reserveAddr();
    const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'broken' } });
    const tunnel = online({ edge: 'broken' }, () => a);
    const edge = await repos.edges.create('tcp', {
      hostports: [addr],
      backend: { backend_id: backend.id },
    });
    // What an older version might have stored: the API would refuse this text at save time.
    const unknownAction = 'on_tcp_connect: [{actions: [{type: no-such-action}]}]';
    await store.db
      .updateTable('edges')
      .set({ traffic_policy: JSON.stringify({ enabled: true, value: unknownAction }) })
      .where('id', '=', edge.id)
      .execute();
    await runtime.sync();
    await listening(addr);
    expect(registry.byPort(portOf(addr))?.refusal).toMatch(/cannot run/);
    expect((await tcpExchange(portOf(addr))).served).toBe(false);
    expect(tunnel.connects).toEqual([]);
    await repos.edges.delete('tcp', edge.id);
  });

  describe('TLS edges on the HTTPS port', () => {
    let edgeId: string;
    const name = `app.${kind}.tls-edges.test`;
    const hello = (extra: Partial<Parameters<typeof tlsExchange>[0]>) =>
      tlsExchange({ port: ingress.httpsPort, servername: name, ...extra });

    beforeAll(async () => {
      await reserveDomain(name);
      const backend = await repos.backends.tunnelGroups.create({ labels: { edge: 'tls' } });
      const edge = await repos.edges.create('tls', {
        hostports: [`${name}:${TEST_STORE_SETTINGS.httpsPort}`],
        backend: { backend_id: backend.id },
      });
      edgeId = edge.id;
      await runtime.sync();
    });

    it('passes TLS through to the agent unless the edge terminates it', async () => {
      const tunnel = online({ edge: 'tls' }, () => a);
      const through = await hello({});
      expect(through).toMatchObject({ text: 'tls-upstream:ping', peerCn: 'upstream.test' });
      expect(tunnel.connects[0]).toMatchObject({
        proto: 'tls',
        edgeType: '2',
        passthroughTls: true,
      });
      expect(registry.byHost(name)?.edge).toEqual({ id: edgeId, type: 'tls' });
    });

    it('refuses a client ip_restriction does not allow, before any handshake', async () => {
      online({ edge: 'tls' }, () => a);
      const policy = await repos.ipPolicies.create({ description: 'office only' });
      await repos.ipPolicyRules.create({
        ip_policy_id: policy.id,
        cidr: '10.0.0.0/8',
        action: 'allow',
      });
      await repos.edges.setModule('tls', edgeId, 'ip_restriction', { ip_policy_ids: [policy.id] });
      await runtime.sync();
      const refused = await hello({});
      expect(refused).toMatchObject({ served: false, peerCn: undefined });
      await repos.edges.deleteModule('tls', edgeId, 'ip_restriction');
      await runtime.sync();
      expect((await hello({})).text).toBe('tls-upstream:ping');
    });

    it('denies TLS 1.3 clients with the API sample policy while TLS 1.2 passes', async () => {
      online({ edge: 'tls' }, () => a);
      await repos.edges.setModule('tls', edgeId, 'traffic_policy', { value: TLS_SAMPLE });
      await runtime.sync();
      expect((await hello({ minVersion: 'TLSv1.3' })).served).toBe(false);
      expect((await hello({ maxVersion: 'TLSv1.2' })).text).toBe('tls-upstream:ping');
      expect(events.eventsFor(edgeId).map((e) => e.outcome)).toEqual(['denied', 'log']);
      expect(events.eventsFor(edgeId)[1]!.metadata).toEqual({ message: 'Invalid TLS Version' });
      await repos.edges.deleteModule('tls', edgeId, 'traffic_policy');
    });

    it('terminates with the edge certificate and min_version, then checks client certificates', async () => {
      const tunnel = online({ edge: 'tls' }, () => b);
      await repos.edges.setModule('tls', edgeId, 'tls_termination', {
        terminate_at: 'edge',
        min_version: '1.3',
      });
      await runtime.sync();
      const terminated = await hello({ ca: ca.certPem });
      expect(terminated).toMatchObject({ text: 'b:ping', authorized: true, protocol: 'TLSv1.3' });
      expect(tunnel.connects[0]).toMatchObject({
        proto: 'tls',
        edgeType: '2',
        passthroughTls: false,
      });
      expect((await hello({ maxVersion: 'TLSv1.2' })).served).toBe(false);

      const authority = await repos.certificateAuthorities.create({ ca_pem: pki.ca.certPem });
      await repos.edges.setModule('tls', edgeId, 'mutual_tls', {
        certificate_authority_ids: [authority.id],
      });
      await runtime.sync();
      expect((await hello({})).served).toBe(false);
      const stranger = clientPki('Someone Else');
      try {
        expect((await hello({ cert: stranger.issue('mallory') })).served).toBe(false);
      } finally {
        stranger.cleanup();
      }
      expect((await hello({ cert: pki.issue('alice') })).text).toBe('b:ping');
    });
  });
});
