import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { clientPki } from '../../../test/support/client-certificates.js';
import {
  startEchoServer,
  startTlsEchoServer,
  tlsExchange,
  type EchoServer,
} from '../../../test/support/edge-traffic.js';
import {
  startTestIngress,
  type FakeTunnel,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { MAX_FORWARD_HOPS } from '../registry/internal-routing.js';
import { policyEndpoints, type PolicyEndpoints } from '../../../test/support/policy-endpoints.js';

/**
 * forward-internal on TLS endpoints (the HTTPS port, routed by SNI), over real sockets: the
 * connection, ClientHello included, goes to the internal TLS endpoint's agent untouched; after
 * terminate-tls it goes as plaintext. Offline targets, loops and the hop limit close it.
 */

let t: TestIngress;
/** The services' own certificates, from a CA the edge knows nothing of. */
const servicePki = clientPki('Service CA');
/** The agents' services: TLS echoes (passthrough) and a plain one (after terminate-tls). */
let front: EchoServer;
let internal: EchoServer;
let internalB: EchoServer;
let plain: EchoServer;
let endpoints: PolicyEndpoints;

beforeAll(async () => {
  t = await startTestIngress();
  const cert = servicePki.issue('service.burrow.test');
  front = await startTlsEchoServer('front', cert);
  internal = await startTlsEchoServer('internal', cert);
  internalB = await startTlsEchoServer('internal-b', cert);
  plain = await startEchoServer('plain');
  endpoints = policyEndpoints(t.registry);
});

afterEach(() => {
  endpoints.removeAll();
});

afterAll(async () => {
  await t.close();
  await Promise.all([front.close(), internal.close(), internalB.close(), plain.close()]);
  servicePki.cleanup();
});

/** A public TLS endpoint whose agent's service is the `front` echo, or a cloud one (no agent). */
const publicEndpoint = (policy?: string, kind: 'agent' | 'cloud' = 'agent'): FakeTunnel =>
  endpoints.publicEndpoint('tls', front.port, policy, kind);

/** An internal endpoint `name` (`tls://name`) whose agent's service listens on `port`. */
const internalEndpoint = (
  name: string,
  policy?: string,
  options: { port?: number; pooling?: boolean; proto?: 'tls' | 'tcp' } = {},
): FakeTunnel =>
  endpoints.internalEndpoint(options.proto ?? 'tls', name, options.port ?? internal.port, policy, {
    pooling: options.pooling,
  });

const forwardTo = (url: string, extra = ''): string => `
on_tcp_connect:
  - actions:
      - type: forward-internal
        config: { url: "${url}"${extra} }`;

const hello = (tunnel: FakeTunnel, extra: { ca?: string } = {}) =>
  tlsExchange({ port: t.httpsPort, servername: tunnel.hostname!, ...extra });

describe('forward-internal on TLS endpoints', () => {
  it("passes an agent endpoint's connection, ClientHello and all, to the internal endpoint", async () => {
    const target = internalEndpoint('svc.internal');
    const pub = publicEndpoint(forwardTo('tls://svc.internal:443'));
    const seen = await hello(pub);
    // The client's TLS ends at the internal endpoint's service: its certificate, not the edge's.
    expect(seen).toMatchObject({ text: 'internal:ping', peerCn: 'service.burrow.test' });
    expect(target.connects).toEqual([
      expect.objectContaining({ proto: 'tls', passthroughTls: true }),
    ]);
    expect(pub.connects).toEqual([]);
  });

  it('forwards from a cloud endpoint; one that forwards nowhere closes the connection', async () => {
    const target = internalEndpoint('cloud-svc.internal');
    const cloud = publicEndpoint(forwardTo('tls://cloud-svc.internal'), 'cloud');
    expect((await hello(cloud)).text).toBe('internal:ping');
    expect(target.connects).toHaveLength(1);

    const nowhere = publicEndpoint(
      `on_tcp_connect: [{ actions: [{ type: log, config: { metadata: { a: b } } }] }]`,
      'cloud',
    );
    const closed = await hello(nowhere);
    expect(closed.served).toBe(false);
    expect(closed.error).toBeDefined();
    const bare = publicEndpoint(undefined, 'cloud');
    expect((await hello(bare)).served).toBe(false);
    expect(nowhere.connects).toEqual([]);
    expect(bare.connects).toEqual([]);
  });

  it("runs the internal endpoint's own policy on the forwarded connection", async () => {
    // It sees the public name the client asked for, and can refuse.
    const target = internalEndpoint(
      'guarded.internal',
      `on_tcp_connect: [{ expressions: ["!conn.tls.sni.startsWith('ep')"], actions: [{ type: deny }] }]`,
    );
    const pub = publicEndpoint(forwardTo('tls://guarded.internal'));
    expect((await hello(pub)).text).toBe('internal:ping');
    expect(target.connects).toHaveLength(1);
    const shut = internalEndpoint(
      'shut.internal',
      `on_tcp_connect: [{ actions: [{ type: deny }] }]`,
    );
    const denied = publicEndpoint(forwardTo('tls://shut.internal'));
    expect((await hello(denied)).served).toBe(false);
    expect([...shut.connects, ...denied.connects]).toEqual([]);
  });

  it('shares the connections among pooled internal endpoints', async () => {
    const one = internalEndpoint('pool.internal', undefined, { pooling: true });
    const two = internalEndpoint('pool.internal', undefined, {
      pooling: true,
      port: internalB.port,
    });
    const pub = publicEndpoint(forwardTo('tls://pool.internal'));
    const texts = [(await hello(pub)).text, (await hello(pub)).text];
    expect(texts.sort()).toEqual(['internal-b:ping', 'internal:ping']);
    expect(one.connects).toHaveLength(1);
    expect(two.connects).toHaveLength(1);
  });

  it('closes on an offline target with on_error halt; continue reaches the endpoint’s agent', async () => {
    const halt = publicEndpoint(forwardTo('tls://gone.internal'));
    const refused = await hello(halt);
    expect(refused.served).toBe(false);
    expect(halt.connects).toEqual([]);

    const goOn = publicEndpoint(forwardTo('tls://gone.internal', ', on_error: continue'));
    expect((await hello(goOn)).text).toBe('front:ping');
    // A cloud endpoint has no agent to go on to.
    const cloud = publicEndpoint(forwardTo('tls://gone.internal', ', on_error: continue'), 'cloud');
    expect((await hello(cloud)).served).toBe(false);
  });

  it('closes a connection that loops or passes through too many endpoints', async () => {
    const a = internalEndpoint('tls-loop-a.internal', forwardTo('tls://tls-loop-b.internal'));
    const b = internalEndpoint('tls-loop-b.internal', forwardTo('tls://tls-loop-a.internal'));
    const pub = publicEndpoint(forwardTo('tls://tls-loop-a.internal'));
    expect((await hello(pub)).served).toBe(false);
    expect([...a.connects, ...b.connects, ...pub.connects]).toEqual([]);

    const hops = Array.from({ length: MAX_FORWARD_HOPS }, (_, i) =>
      internalEndpoint(`tls-hop${i}.internal`, forwardTo(`tls://tls-hop${i + 1}.internal`)),
    );
    const last = internalEndpoint(`tls-hop${MAX_FORWARD_HOPS}.internal`);
    const long = publicEndpoint(forwardTo('tls://tls-hop0.internal'));
    expect((await hello(long)).served).toBe(false);
    expect([...hops.flatMap((h) => h.connects), ...last.connects]).toEqual([]);
    // The same chain from further along stays within the limit: the last endpoint answers.
    const within = publicEndpoint(forwardTo('tls://tls-hop2.internal'));
    expect((await hello(within)).text).toBe('internal:ping');
    expect(last.connects).toHaveLength(1);
  });

  it('closes a forward to an internal endpoint that is not a TLS one', async () => {
    const tcp = internalEndpoint('db.internal:5432', undefined, { proto: 'tcp' });
    const pub = publicEndpoint(forwardTo('tcp://db.internal:5432'));
    expect((await hello(pub)).served).toBe(false);
    expect(tcp.connects).toEqual([]);
  });

  it('after terminate-tls, forwards plaintext (passthroughTls false)', async () => {
    const target = internalEndpoint('plain.internal', undefined, { port: plain.port });
    const pub = publicEndpoint(`
on_tcp_connect:
  - actions:
      - type: terminate-tls
      - type: forward-internal
        config: { url: tls://plain.internal }`);
    const seen = await hello(pub, { ca: t.ca.certPem });
    // TLS ends at the edge, with its certificate for the public name.
    expect(seen).toMatchObject({ text: 'plain:ping', peerCn: pub.hostname, authorized: true });
    expect(target.connects).toEqual([
      expect.objectContaining({ proto: 'tls', passthroughTls: false }),
    ]);
    expect(pub.connects).toEqual([]);
  });

  it('closes when the internal endpoint runs terminate-tls on an already terminated connection', async () => {
    const target = internalEndpoint(
      'twice.internal',
      `on_tcp_connect: [{ actions: [{ type: terminate-tls }] }]`,
      { port: plain.port },
    );
    const pub = publicEndpoint(`
on_tcp_connect:
  - actions:
      - type: terminate-tls
      - type: forward-internal
        config: { url: tls://twice.internal }`);
    const seen = await hello(pub, { ca: t.ca.certPem });
    expect(seen.text).toBe('');
    expect(target.connects).toEqual([]);
  });

  it('lets the internal endpoint terminate TLS on a connection passed through to it', async () => {
    const target = internalEndpoint(
      'ends-tls.internal',
      `on_tcp_connect: [{ actions: [{ type: terminate-tls }] }]`,
      { port: plain.port },
    );
    const pub = publicEndpoint(forwardTo('tls://ends-tls.internal'));
    const seen = await hello(pub, { ca: t.ca.certPem });
    expect(seen).toMatchObject({ text: 'plain:ping', peerCn: pub.hostname, authorized: true });
    expect(target.connects).toEqual([
      expect.objectContaining({ proto: 'tls', passthroughTls: false }),
    ]);
  });
});
