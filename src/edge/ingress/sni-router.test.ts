import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import {
  connect as netConnect,
  createServer as createNetServer,
  type AddressInfo,
  type Socket,
} from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl } from '../../../test/support/curl.js';
import {
  fakeTunnel,
  metricValue,
  type FakeTunnel,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../test/support/ingress.js';
import { CertificateStore } from '../certificates/certificate-store.js';
import { EndpointMeters } from '../metrics/endpoint-meters.js';
import { HttpIngress } from './http/http-ingress.js';
import { LocalCa } from '../certificates/local-ca.js';
import { EdgeMetrics } from '../metrics/metrics.js';
import { SniRouter } from './sni-router.js';
import { TunnelRegistry, type TunnelProto } from '../registry/tunnel-registry.js';

let t: TestIngress;
let upstream: LocalServer;
let upstreamCaDir: string;
let upstreamCa: LocalCa;
let tlsUpstream: { port: number; close(): void };
let upstreamCertPem: string;

/** GET over HTTPS to the ingress, trusting only `ca`; resolves with status, body and the peer. */
function httpsGet(
  port: number,
  servername: string | undefined,
  options: { ca: string; host?: string; path?: string } = { ca: '' },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path: options.path ?? '/',
        ca: options.ca,
        agent: false,
        headers: { Host: options.host ?? servername ?? '' },
        ...(servername !== undefined ? { servername } : {}),
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A TLS client connection; resolves when the handshake is done or rejects with its error code. */
function tlsClient(port: number, servername: string | undefined, ca: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port,
      ca,
      ...(servername !== undefined ? { servername } : {}),
    });
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(err.code ?? err.message)),
    );
  });
}

beforeAll(async () => {
  t = await startTestIngress();
  upstream = await startHttpUpstream((req, res) => {
    res.end(JSON.stringify({ url: req.url, headers: req.headers }));
  });
  // The service behind a tls tunnel has its own certificate, from a CA the edge knows nothing of.
  upstreamCaDir = mkdtempSync(join(tmpdir(), 'burrow-upstream-ca-'));
  upstreamCa = await LocalCa.loadOrCreate(upstreamCaDir);
  const issued = await upstreamCa.issue(['pass.burrow.test']);
  upstreamCertPem = issued.certPem;
  const server = createTlsServer({ cert: issued.certPem, key: issued.keyPem }, (socket) => {
    socket.on('data', (d: Buffer) => socket.write(`upstream got: ${d.toString()}`));
    socket.on('end', () => socket.end());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  tlsUpstream = { port: (server.address() as AddressInfo).port, close: () => server.close() };
});

afterAll(async () => {
  await t.close();
  await upstream.close();
  tlsUpstream.close();
  rmSync(upstreamCaDir, { recursive: true, force: true });
});

/** A fake tunnel for `hostname` to 127.0.0.1:`upstreamPort`, online in the shared ingress. */
function onlineTunnel(proto: TunnelProto, hostname: string, upstreamPort: number): FakeTunnel {
  const tunnel = fakeTunnel({ proto, hostname, upstreamPort });
  t.registry.addTunnel(tunnel);
  return tunnel;
}

describe('HTTPS termination', () => {
  it('serves an https tunnel with a local-CA certificate and X-Forwarded-Proto https', async () => {
    const tunnel = onlineTunnel('https', 'secure.burrow.test', upstream.port);
    const reply = await httpsGet(t.httpsPort, 'secure.burrow.test', {
      ca: t.ca.certPem,
      path: '/x',
    });
    expect(reply.status).toBe(200);
    const seen = JSON.parse(reply.body);
    expect(seen.headers['x-forwarded-proto']).toBe('https');
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(tunnel.connects[0]).toMatchObject({ proto: 'https', passthroughTls: false });
    t.registry.removeTunnel(tunnel.id);
  });

  it('works for curl trusting ca.pem', async () => {
    const tunnel = onlineTunnel('http', 'curl.burrow.test', upstream.port);
    const dir = mkdtempSync(join(tmpdir(), 'burrow-cacert-'));
    writeFileSync(join(dir, 'ca.pem'), t.ca.certPem);
    const reply = await curl([
      '--cacert',
      join(dir, 'ca.pem'),
      '--resolve',
      `curl.burrow.test:${t.httpsPort}:127.0.0.1`,
      `https://curl.burrow.test:${t.httpsPort}/from-curl`,
    ]);
    rmSync(dir, { recursive: true, force: true });
    expect(reply.status).toBe(200);
    expect(reply.body.url).toBe('/from-curl');
    expect(reply.body.headers['x-forwarded-proto']).toBe('https');
    t.registry.removeTunnel(tunnel.id);
  });

  it('answers 404 over HTTPS for a served name with no tunnel online', async () => {
    const reply = await httpsGet(t.httpsPort, 'idle.burrow.test', { ca: t.ca.certPem });
    expect(reply.status).toBe(404);
    expect(reply.body).toContain('No tunnel is online for idle.burrow.test');
  });

  it('refuses the handshake for a name the edge does not serve, and for no SNI without a default certificate', async () => {
    await expect(tlsClient(t.httpsPort, 'example.org', t.ca.certPem)).rejects.toThrow(
      /ALERT|ECONNRESET/,
    );
    await expect(tlsClient(t.httpsPort, undefined, t.ca.certPem)).rejects.toThrow(
      /ALERT|ECONNRESET/,
    );
  });

  it('serves clients without SNI with the default certificate, routed by Host', async () => {
    const issued = await t.ca.issue(['127.0.0.1']);
    const withDefault = await startTestIngress({
      defaultCertificate: { certPem: issued.certPem, keyPem: issued.keyPem },
    });
    const tunnel = fakeTunnel({
      proto: 'https',
      hostname: 'nosni.burrow.test',
      upstreamPort: upstream.port,
    });
    withDefault.registry.addTunnel(tunnel);
    const reply = await httpsGet(withDefault.httpsPort, undefined, {
      ca: withDefault.ca.certPem + issued.certPem,
      host: 'nosni.burrow.test',
    });
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.body).headers['x-forwarded-proto']).toBe('https');
    await withDefault.close();
  });

  it('tells plain-HTTP clients they reached the HTTPS port', async () => {
    const reply = await curl([`http://127.0.0.1:${t.httpsPort}/`]);
    expect(reply.status).toBe(400);
    expect(reply.headers['burrow-error-code']).toBe('ERR_BURROW_PLAIN_HTTP_ON_HTTPS_PORT');
  });
});

describe('TLS passthrough by SNI', () => {
  it('passes the TLS connection through: the client sees the upstream certificate', async () => {
    const tunnel = onlineTunnel('tls', 'pass.burrow.test', tlsUpstream.port);
    const socket = await tlsClient(t.httpsPort, 'pass.burrow.test', upstreamCa.certPem);
    expect(socket.authorized).toBe(true);
    const upstreamLeaf = new X509Certificate(
      upstreamCertPem.split(/(?<=-----END CERTIFICATE-----)/)[0]!,
    );
    expect(socket.getPeerCertificate().fingerprint256).toBe(upstreamLeaf.fingerprint256);
    socket.end('ping');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (answer += d));
    await once(socket, 'end');
    expect(answer).toBe('upstream got: ping');
    expect(tunnel.connects[0]).toMatchObject({ proto: 'tls', passthroughTls: true, edgeType: '' });
    expect(metricValue(t.metrics, 'burrow_connections_total', { endpoint: tunnel.url! })).toBe(1);
    expect(
      metricValue(t.metrics, 'burrow_bytes_received_total', { endpoint: tunnel.url! }),
    ).toBeGreaterThan(200);
    t.registry.removeTunnel(tunnel.id);
  });

  it('reassembles a ClientHello that arrives a few bytes at a time', async () => {
    const tunnel = onlineTunnel('tls', 'pass.burrow.test', tlsUpstream.port);
    // A forwarder that dribbles the client's first bytes into the ingress 7 bytes per segment.
    const dribbler = createNetServer((client: Socket) => {
      const toIngress = netConnect(t.httpsPort, '127.0.0.1');
      toIngress.setNoDelay(true);
      client.once('data', (first: Buffer) => {
        client.pause();
        let offset = 0;
        const step = (): void => {
          if (offset >= first.length) {
            client.pipe(toIngress);
            client.resume();
            return;
          }
          toIngress.write(first.subarray(offset, offset + 7));
          offset += 7;
          setTimeout(step, 1);
        };
        step();
      });
      toIngress.pipe(client);
      client.on('error', () => toIngress.destroy());
      toIngress.on('error', () => client.destroy());
    });
    dribbler.listen(0, '127.0.0.1');
    await once(dribbler, 'listening');
    const port = (dribbler.address() as AddressInfo).port;
    const socket = await tlsClient(port, 'pass.burrow.test', upstreamCa.certPem);
    expect(socket.authorized).toBe(true);
    socket.destroy();
    dribbler.close();
    t.registry.removeTunnel(tunnel.id);
  });

  it('fails the client quickly with a TLS alert when the agent is gone', async () => {
    const tunnel = fakeTunnel({
      proto: 'tls',
      hostname: 'dead.burrow.test',
      connect: () => Promise.reject(new Error('session closed')),
    });
    t.registry.addTunnel(tunnel);
    const started = performance.now();
    await expect(tlsClient(t.httpsPort, 'dead.burrow.test', upstreamCa.certPem)).rejects.toThrow(
      /INTERNAL_ERROR/,
    );
    expect(performance.now() - started).toBeLessThan(1000);
    t.registry.removeTunnel(tunnel.id);
  });
});

describe('SniRouter limits', () => {
  it('closes a connection that does not finish its ClientHello in time', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-sni-'));
    const registry = new TunnelRegistry();
    const meters = new EndpointMeters(new EdgeMetrics());
    const http = new HttpIngress({ registry, meters });
    const certificates = new CertificateStore({
      ca: await LocalCa.loadOrCreate(dir),
      nameAllowed: () => true,
    });
    const router = new SniRouter({ registry, meters, http, certificates, helloTimeoutMs: 200 });
    router.server.listen(0, '127.0.0.1');
    await once(router.server, 'listening');
    const socket = netConnect((router.server.address() as AddressInfo).port, '127.0.0.1');
    await once(socket, 'connect');
    const started = performance.now();
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])); // a record header, then silence
    socket.resume();
    await once(socket, 'close');
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThan(150);
    expect(waited).toBeLessThan(1000);
    expect(router.openConnections).toBe(0);
    router.server.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
