import { generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../edge/certificates/certificates.js';
import { EC_P256, subtle, x509 } from '../edge/certificates/x509.js';
import { until } from '../../test/support/mux.js';
import { BurrowConnectError, type ConnectFailure } from './connect-errors.js';
import { dialEdge, type DialOptions } from './dial.js';
import { connect } from './index.js';
import { certificateFingerprint, resolveTrust } from './trust.js';

/**
 * dialEdge against real TLS listeners: what it trusts, what it refuses and with which failure, and
 * that a refused server never receives a byte (so never the authtoken).
 */

interface FakeListener {
  port: number;
  /** TCP connections accepted: one per handshake a client started. */
  handshakes: number;
  /** Application bytes received after the handshake, over all connections. */
  received: number;
  close(): Promise<void>;
}

const listeners: Array<{ close(): Promise<void> }> = [];

/** Close `server`, cutting the connections a test left open. */
function closer(server: net.Server): () => Promise<void> {
  const open = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  return () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of open) s.destroy();
    });
}

async function tlsListener(certPem: string, keyPem: string): Promise<FakeListener> {
  const state = { handshakes: 0, received: 0 };
  const server = tls.createServer({ cert: certPem, key: keyPem }, (socket) => {
    socket.on('data', (d: Buffer) => (state.received += d.length));
    socket.on('error', () => undefined);
  });
  server.on('connection', () => state.handshakes++);
  const close = closer(server);
  server.on('tlsClientError', () => undefined);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const listener = {
    port: (server.address() as net.AddressInfo).port,
    get handshakes() {
      return state.handshakes;
    },
    get received() {
      return state.received;
    },
    close,
  };
  listeners.push(listener);
  return listener;
}

async function tcpListener(onSocket: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer(onSocket);
  listeners.push({ close: closer(server) });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

function options(port: number, change: Partial<DialOptions> = {}): DialOptions {
  return {
    address: { host: '127.0.0.1', port },
    trust: resolveTrust(undefined, undefined),
    serverName: undefined,
    offerAlpn: false,
    timeoutMs: 5000,
    ...change,
  };
}

async function failureOf(promise: Promise<unknown>): Promise<ConnectFailure> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BurrowConnectError);
  return (err as BurrowConnectError).failure;
}

/** A leaf that names the real CA as its issuer but is signed by another key. */
async function forgedLeaf(ca: LocalCa): Promise<{ certPem: string; keyPem: string }> {
  const real = new x509.X509Certificate(ca.certPem);
  const attacker = await subtle.generateKey(EC_P256, true, ['sign', 'verify']);
  const leaf = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = leaf.publicKey.export({ type: 'spki', format: 'der' });
  const ski = real.getExtension(x509.SubjectKeyIdentifierExtension)!;
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '0badc0de',
    subject: [{ CN: ['localhost'] }],
    issuer: real.subjectName,
    notBefore: new Date(Date.now() - 3600_000),
    notAfter: new Date(Date.now() + 86_400_000),
    signingAlgorithm: EC_P256,
    publicKey: spki,
    signingKey: attacker.privateKey,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'dns', value: 'localhost' },
        { type: 'ip', value: '127.0.0.1' },
      ]),
      new x509.AuthorityKeyIdentifierExtension(ski.keyId),
    ],
  });
  return {
    // The real CA travels along, so a careless check would find its fingerprint in the chain.
    certPem: cert.toString('pem') + '\n' + ca.certPem,
    keyPem: leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

describe('dialEdge', () => {
  let dir: string;
  let ca: LocalCa;
  let other: LocalCa;
  let good: FakeListener;
  let pin: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-dial-'));
    ca = await LocalCa.loadOrCreate(join(dir, 'a'));
    other = await LocalCa.loadOrCreate(join(dir, 'b'));
    const leaf = await ca.issue(['localhost', '127.0.0.1']);
    good = await tlsListener(leaf.certPem, leaf.keyPem);
    pin = certificateFingerprint(ca.certPem);
  });
  afterAll(async () => {
    await Promise.all(listeners.map((l) => l.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('connects with the CA on top of the system roots', async () => {
    const socket = await dialEdge(
      options(good.port, { trust: resolveTrust(ca.certPem, undefined) }),
    );
    expect(socket.authorized).toBe(true);
    socket.destroy();
  });

  it('refuses an unknown CA, showing the CA presented, before sending anything', async () => {
    const before = good.received;
    const f = await failureOf(dialEdge(options(good.port)));
    expect(f).toMatchObject({ kind: 'untrusted', code: 'SELF_SIGNED_CERT_IN_CHAIN' });
    expect(f.chain.map((c) => c.fingerprint)).toEqual([expect.any(String), pin]);
    const wrongCa = await failureOf(
      dialEdge(options(good.port, { trust: resolveTrust(other.certPem, undefined) })),
    );
    expect(wrongCa.kind).toBe('untrusted');
    expect(good.received).toBe(before);
  });

  it('with the right pin and no CA: learns the CA from the chain, then verifies against it alone', async () => {
    const trust = resolveTrust(
      undefined,
      pin.slice('sha256:'.length).replace(/:/g, '').toLowerCase(),
    );
    const handshakes = good.handshakes;
    const socket = await dialEdge(options(good.port, { trust }));
    expect(socket.authorized).toBe(true);
    await until(() => good.handshakes - handshakes >= 2, 2000);
    expect(good.handshakes - handshakes).toBe(2);
    expect(trust.pinned?.trim()).toBe(ca.certPem.trim());
    socket.destroy();
    // Reconnects use the learnt certificate: one handshake.
    const again = await dialEdge(options(good.port, { trust }));
    await until(() => good.handshakes - handshakes >= 3, 2000);
    expect(good.handshakes - handshakes).toBe(3);
    again.destroy();
  });

  it('with a pin of a CA given with --ca: one handshake', async () => {
    const trust = resolveTrust([other.certPem, ca.certPem], pin);
    const handshakes = good.handshakes;
    (await dialEdge(options(good.port, { trust }))).destroy();
    await until(() => good.handshakes - handshakes >= 1, 2000);
    await new Promise((r) => setTimeout(r, 50));
    expect(good.handshakes - handshakes).toBe(1);
  });

  it('refuses a wrong pin even when the CA is trusted, and sends nothing', async () => {
    const before = good.received;
    const wrong = certificateFingerprint(other.certPem);
    for (const trust of [resolveTrust(undefined, wrong), resolveTrust(ca.certPem, wrong)]) {
      const f = await failureOf(dialEdge(options(good.port, { trust })));
      expect(f.kind).toBe('pin-mismatch');
      expect(f.pin).toBe(wrong);
      expect(f.chain.map((c) => c.fingerprint)).toContain(pin);
    }
    expect(good.received).toBe(before);
  });

  it('refuses a forged leaf that travels with the real CA, with or without the CA at hand', async () => {
    const forged = await forgedLeaf(ca);
    const mitm = await tlsListener(forged.certPem, forged.keyPem);
    for (const trust of [resolveTrust(undefined, pin), resolveTrust(ca.certPem, pin)]) {
      const f = await failureOf(dialEdge(options(mitm.port, { trust })));
      expect(f.kind).toBe('untrusted');
      expect(f.code).toBe('CERT_SIGNATURE_FAILURE');
    }
    const f = await failureOf(
      dialEdge(options(mitm.port, { trust: resolveTrust(ca.certPem, undefined) })),
    );
    expect(f.kind).toBe('untrusted');
    expect(mitm.received).toBe(0);
  });

  it('checks the name also with a pin, and lists the names the certificate holds', async () => {
    const leaf = await ca.issue(['edge.example.com']);
    const elsewhere = await tlsListener(leaf.certPem, leaf.keyPem);
    for (const trust of [resolveTrust(ca.certPem, undefined), resolveTrust(undefined, pin)]) {
      const f = await failureOf(dialEdge(options(elsewhere.port, { trust })));
      expect(f).toMatchObject({ kind: 'name-mismatch', serverName: '127.0.0.1' });
      expect(f.chain[0]?.altNames).toEqual(['edge.example.com']);
    }
    const ok = await dialEdge(
      options(elsewhere.port, {
        trust: resolveTrust(ca.certPem, undefined),
        serverName: 'edge.example.com',
      }),
    );
    ok.destroy();
    expect(elsewhere.received).toBe(0);
  });

  it('tells an expired certificate from one not valid yet', async () => {
    const day = 86_400_000;
    const old = await ca.issue(['127.0.0.1'], { now: new Date(Date.now() - 200 * day) });
    const future = await ca.issue(['127.0.0.1'], { now: new Date(Date.now() + 2 * day) });
    const trust = resolveTrust(ca.certPem, undefined);
    const expired = await tlsListener(old.certPem, old.keyPem);
    expect(await failureOf(dialEdge(options(expired.port, { trust })))).toMatchObject({
      kind: 'expired',
      code: 'CERT_HAS_EXPIRED',
    });
    const early = await tlsListener(future.certPem, future.keyPem);
    expect(await failureOf(dialEdge(options(early.port, { trust })))).toMatchObject({
      kind: 'not-yet-valid',
      code: 'CERT_NOT_YET_VALID',
    });
  });

  it('says refused, not TLS, and timeout for the network failures', async () => {
    const closed = await tcpListener(() => undefined);
    await listeners.pop()!.close();
    expect((await failureOf(dialEdge(options(closed)))).kind).toBe('refused');
    const http = await tcpListener((s) => s.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    expect((await failureOf(dialEdge(options(http)))).kind).toBe('not-tls');
    const silent = await tcpListener(() => undefined);
    expect(await failureOf(dialEdge(options(silent, { timeoutMs: 200 })))).toMatchObject({
      kind: 'timeout',
      timeoutMs: 200,
    });
  });

  it('connect() with a wrong pin rejects before the authtoken leaves the machine', async () => {
    const before = good.received;
    const err = await connect({
      serverAddr: `127.0.0.1:${good.port}`,
      authtoken: 'secret-token-never-sent',
      caFingerprint: certificateFingerprint(other.certPem),
      reconnect: false,
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(BurrowConnectError);
    expect(err?.message).toMatch(
      /no certificate it presents has the fingerprint of the `caFingerprint` option/,
    );
    expect(good.received).toBe(before);
  });
});
