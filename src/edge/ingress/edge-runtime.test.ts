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
import { freePort, startTestIngress, type TestIngress } from '../../../test/support/ingress.js';
import { until } from '../../../test/support/mux.js';
import {
  createTestDatabase,
  DATABASE_KINDS,
  type TestDatabase,
} from '../../../test/support/stores.js';
import { CertificateStore, LocalCa } from '../certificates/certificates.js';
import { EdgeRuntime } from './edge-runtime.js';
import { TunnelRegistry } from '../registry/tunnel-registry.js';

describe.each(DATABASE_KINDS)('TCP and TLS edges on live traffic (%s)', (kind) => {
  let db: TestDatabase;
  let store: Store;
  let repos: Repositories;
  let registry: TunnelRegistry;
  let runtime: EdgeRuntime;
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

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await openStore({ database: db.database, dataDir: db.dataDir });
    repos = createTestRepositories(store);
    registry = new TunnelRegistry();
    events = new PolicyEventLog();
    caDir = mkdtempSync(join(tmpdir(), 'burrow-edge-ca-'));
    ca = await LocalCa.loadOrCreate(caDir);
    const certificates = new CertificateStore({ ca, nameAllowed: () => true });
    runtime = new EdgeRuntime({
      repos,
      registry,
      certificates,
      bindHost: '127.0.0.1',
      policyEvents: events,
      syncIntervalMs: 100,
      random: () => 0,
    });
    await runtime.start();
    ingress = await startTestIngress({ registry, tlsEdges: runtime });
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
    await runtime?.close();
    await ingress?.close();
    for (const u of upstreams) await u.close();
    certs.cleanup();
    pki.cleanup();
    rmSync(caDir, { recursive: true, force: true });
    await store?.close();
    await db?.drop();
  });

  it("applies this process's edge writes at once, without waiting for a periodic reload", async () => {
    const quiet = new EdgeRuntime({
      repos,
      registry,
      certificates: { certificateFor: () => Promise.reject(new Error('unused')) },
      bindHost: '127.0.0.1',
      syncIntervalMs: 3_600_000,
    });
    await quiet.start();
    try {
      const name = `now-${kind}.example.com`;
      await reserveDomain(name);
      const edge = await repos.edges.create('tls', {
        hostports: [`${name}:${TEST_STORE_SETTINGS.httpsPort}`],
      });
      await until(() => quiet.servesName(name), 1000);
      expect(quiet.servesName(`www.${name}`)).toBe(false);
      await repos.edges.delete('tls', edge.id);
      await until(() => !quiet.servesName(name), 1000);
    } finally {
      await quiet.close();
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
    await until(() => runtime.tcpPorts.includes(portOf(first)));
    await runtime.listening(portOf(first));
    expect(await served(portOf(first))).toBe('a:ping');

    await repos.edges.update('tcp', edge.id, { hostports: [second] });
    await until(() => runtime.tcpPorts.includes(portOf(second)));
    await runtime.listening(portOf(second));
    expect(await served(portOf(second))).toBe('a:ping');
    expect((await tcpExchange(portOf(first))).error).toBe('ECONNREFUSED');

    await repos.edges.delete('tcp', edge.id);
    await until(() => runtime.tcpPorts.length === 0);
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
    await until(() => runtime.tcpPorts.includes(portOf(addr)));
    await runtime.listening(portOf(addr));

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
    await until(() => runtime.tcpPorts.includes(portOf(addr)));
    await runtime.listening(portOf(addr));
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
    await until(() => runtime.tcpPorts.includes(portOf(addr)));
    await runtime.listening(portOf(addr));
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
      await until(() => runtime.tcpPorts.includes(portOf(addr)), 3000);
      await runtime.listening(portOf(addr));
      expect(await served(portOf(addr))).toBe('b:ping');
      await otherRepos.edges.delete('tcp', edge.id);
      await until(() => !runtime.tcpPorts.includes(portOf(addr)), 3000);
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
    await until(() => runtime.tcpPorts.includes(portOf(addr)));
    await runtime.listening(portOf(addr));
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
      expect(runtime.servesName(name)).toBe(true);
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
