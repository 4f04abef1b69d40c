import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseServerAddr } from './dial.js';
import { loadCa } from './trust.js';
import { Endpoint, endpointSpec } from './endpoints.js';
import { createForwarder } from './forward.js';
import { BurrowAgentError, backoffDelay, connect, parseLocalAddress } from './index.js';

describe('parseLocalAddress', () => {
  it.each([
    [3000, { host: 'localhost', port: 3000, tls: false }],
    ['8080', { host: 'localhost', port: 8080, tls: false }],
    ['localhost:3000', { host: 'localhost', port: 3000, tls: false }],
    ['10.0.0.5:22', { host: '10.0.0.5', port: 22, tls: false }],
    ['[::1]:80', { host: '::1', port: 80, tls: false }],
    ['http://app.internal', { host: 'app.internal', port: 80, tls: false }],
    ['https://[::1]:8443/ignored', { host: '::1', port: 8443, tls: true }],
    ['tls://db.internal:5433', { host: 'db.internal', port: 5433, tls: true }],
    ['tcp://127.0.0.1:22', { host: '127.0.0.1', port: 22, tls: false }],
  ])('%s', (target, expected) => {
    expect(parseLocalAddress(target)).toEqual(expected);
  });

  it.each([0, 70000, 'localhost', 'ftp://x:21', 'host:', 'http://:80', 'a b:1', 'tcp://x'])(
    'refuses %s with a message naming the accepted forms',
    (target) => {
      expect(() => parseLocalAddress(target)).toThrow(/use a port \(3000\), host:port/);
    },
  );
});

describe('parseServerAddr', () => {
  it('splits host and port, IPv6 in brackets, default 443', () => {
    expect(parseServerAddr('edge.example.com:4443')).toEqual({
      host: 'edge.example.com',
      port: 4443,
    });
    expect(parseServerAddr('[::1]:4443')).toEqual({ host: '::1', port: 4443 });
    expect(parseServerAddr('edge.example.com')).toEqual({ host: 'edge.example.com', port: 443 });
    expect(() => parseServerAddr('a:99999')).toThrow(BurrowAgentError);
    expect(() => parseServerAddr('http://x:1')).toThrow(/serverAddr must be host:port/);
  });
});

describe('loadCa', () => {
  it('takes PEM text and bytes as they are and reads a path', () => {
    const pem = '-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n';
    expect(loadCa(pem)).toBe(pem);
    expect(loadCa(Buffer.from(pem))).toEqual(Buffer.from(pem));
    const dir = mkdtempSync(join(tmpdir(), 'burrow-sdk-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), pem);
      expect(String(loadCa(join(dir, 'ca.pem')))).toBe(pem);
      expect(() => loadCa(join(dir, 'missing.pem'))).toThrow(/cannot read the CA file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('backoffDelay', () => {
  it('doubles from the initial delay up to the maximum, jittered in the upper half', () => {
    expect(backoffDelay(0, 100, 30_000, () => 0)).toBe(50);
    expect(backoffDelay(0, 100, 30_000, () => 1)).toBe(100);
    expect(backoffDelay(3, 100, 30_000, () => 1)).toBe(800);
    expect(backoffDelay(20, 100, 30_000, () => 1)).toBe(30_000);
    expect(backoffDelay(1000, 100, 30_000, () => 0)).toBe(15_000);
  });
});

describe('connect() argument checks', () => {
  it('refuses a missing authtoken and a bad forward target before dialling', async () => {
    await expect(connect({ authtoken: ' ' })).rejects.toThrow(/an authtoken is required/);
    await expect(connect({ authtoken: 't', serverAddr: 'nope:0' })).rejects.toThrow(
      /serverAddr must be host:port/,
    );
  });
});

describe('bind requests', () => {
  const host = { connectTimeoutMs: 1000, unbind: async () => undefined };

  it('carry the name, policy text and metadata, and the id and token when binding again', () => {
    const spec = endpointSpec(
      'https',
      { domain: 'app.example.com', trafficPolicy: { on_http_request: [] }, metadata: 'm' },
      undefined,
    );
    const endpoint = new Endpoint(host, spec, undefined);
    expect(endpoint.bindRequest()).toMatchObject({
      Id: '',
      Proto: 'https',
      ForwardsTo: expect.stringMatching(/^app:\/\/.+\?pid=\d+$/) as string,
      Opts: { Domain: 'app.example.com', TrafficPolicy: '{"on_http_request":[]}' },
      Extra: { Token: '', Metadata: 'm' },
    });
    endpoint.bound('bind1', 'https://app.example.com', 'tok');
    expect(endpoint.bindRequest()).toMatchObject({ Id: 'bind1', Extra: { Token: 'tok' } });
  });

  it('use Addr for TCP, policy text as given, and the forward target as ForwardsTo', () => {
    const spec = endpointSpec(
      'tcp',
      { addr: 'tcp.example.com:20001', trafficPolicy: 'on_tcp_connect: []\n' },
      createForwarder(22, { connectTimeoutMs: 1000 }),
    );
    expect(spec).toMatchObject({
      proto: 'tcp',
      forwardsTo: 'localhost:22',
      opts: { Addr: 'tcp.example.com:20001', TrafficPolicy: 'on_tcp_connect: []\n' },
    });
    const labeled = new Endpoint(
      host,
      endpointSpec('labeled', { labels: { a: 'b' } }, undefined),
      undefined,
    );
    expect(labeled.bindRequest()).toMatchObject({ Labels: { a: 'b' }, Metadata: '' });
  });

  it('send HostHeaderRewrite for http endpoints that ask for it, with the forward target', () => {
    const forwarder = createForwarder('localhost:3000', { connectTimeoutMs: 1000 });
    const spec = endpointSpec('https', { hostHeaderRewrite: true }, forwarder);
    expect(spec).toMatchObject({
      forwardsTo: 'localhost:3000',
      opts: { Domain: '', HostHeaderRewrite: true },
    });
    const off = endpointSpec('https', { hostHeaderRewrite: false }, forwarder);
    expect(off.kind === 'bind' && 'HostHeaderRewrite' in off.opts).toBe(false);
  });
});
