import { once } from 'node:events';
import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadServerConfig } from './config.js';
import {
  configureEgress,
  egressAgent,
  egressFetch,
  egressRefusal,
  EgressRefusedError,
  parseEgressAllow,
  type EgressAllowEntry,
} from './egress-guard.js';

/**
 * The egress guard against a real HTTP server on 127.0.0.1: refused unless allowed, whether the
 * URL names the address or a name that resolves to it when the socket connects.
 */

let server: Server;
let port: number;
let hits = 0;

beforeAll(async () => {
  server = createServer((_req, res) => {
    hits++;
    res.writeHead(200, { 'content-type': 'application/json', 'x-two': 'a' });
    res.end('{"ok":true}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});

afterAll(() => server.close());
afterEach(() => configureEgress({ allow: [] }));

const allow = (...texts: string[]): EgressAllowEntry[] =>
  texts.map((t) => parseEgressAllow(t) as EgressAllowEntry);

describe('egressRefusal', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.9.9.9', 'loopback'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['::a00:1', 'IPv4-compatible'],
    ['0.0.0.0', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared (CGNAT)'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd00::1', 'unique local'],
    ['224.0.0.251', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['64:ff9b::a00:1', 'private'],
    ['2002:a9fe:a9fe::1', 'link-local'],
  ])('refuses %s (%s)', (address, kind) => {
    expect(egressRefusal(address, address)?.reason).toBe(kind);
  });

  it.each(['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '64:ff9b::808:808'])(
    'lets %s through',
    (address) => expect(egressRefusal(address, address)).toBeUndefined(),
  );

  it("refuses this node's own addresses and --public-ip", () => {
    const own = Object.values(networkInterfaces())
      .flat()
      .find((nic) => nic !== undefined && !nic.internal && nic.family === 'IPv4');
    configureEgress({ allow: [], ownAddresses: ['203.0.113.7'] });
    expect(egressRefusal('node', '203.0.113.7')?.reason).toBe("this node's own");
    if (own) expect(egressRefusal('node', own.address)).toBeInstanceOf(EgressRefusedError);
  });

  it('allows what --egress-allow names: a block, an address, a host name', () => {
    configureEgress({ allow: allow('10.0.0.0/8', '::1', 'IdP.Internal') });
    expect(egressRefusal('x', '10.9.9.9')).toBeUndefined();
    expect(egressRefusal('x', '::1')).toBeUndefined();
    expect(egressRefusal('idp.internal', '192.168.0.5')).toBeUndefined();
    expect(egressRefusal('x', '192.168.0.5')?.reason).toBe('private');
  });

  it('tells the operator of a refusal, once a minute per target', () => {
    const told: string[] = [];
    configureEgress({ allow: [], onRefused: (e) => told.push(e.message) });
    egressRefusal('metadata.internal', '169.254.169.254');
    egressRefusal('metadata.internal', '169.254.169.254');
    expect(told).toEqual([
      'outbound request to metadata.internal (169.254.169.254) refused: link-local address; allow it with --egress-allow',
    ]);
  });
});

describe('parseEgressAllow', () => {
  it.each([
    ['10.0.0.1/8', /network address/],
    ['not a host!', /CIDR block, an IP address or a host name/],
    [`${'a'.repeat(64)}.internal`, /CIDR block, an IP address or a host name/],
    ['1.2.3.4/40', /network address/],
  ])('refuses %s', (text, rule) => {
    const parsed = parseEgressAllow(text);
    expect('problem' in parsed && parsed.problem).toMatch(rule);
  });

  it('reads [::1] as an address', () => {
    expect(parseEgressAllow('[::1]')).toMatchObject({ kind: 'cidr', cidr: { prefix: 128 } });
  });
});

describe('--egress-allow', () => {
  it('is read from the flag (repeated flags arrive joined with commas) or BURROW_EGRESS_ALLOW', () => {
    const flag = loadServerConfig({ 'egress-allow': '127.0.0.1,10.0.0.0/8, idp.internal' }, {});
    expect(flag.egressAllow).toMatchObject([
      { kind: 'cidr', cidr: { text: '127.0.0.1/32' } },
      { kind: 'cidr', cidr: { text: '10.0.0.0/8' } },
      { kind: 'host', name: 'idp.internal' },
    ]);
    expect(loadServerConfig({}, { BURROW_EGRESS_ALLOW: '::1' }).egressAllow).toHaveLength(1);
    expect(loadServerConfig({}, {}).egressAllow).toEqual([]);
  });

  it('refuses an entry that is no block, address or name, naming the option', () => {
    expect(() => loadServerConfig({ 'egress-allow': '10.0.0.1/8' }, {})).toThrow(
      "--egress-allow: '10.0.0.1/8' must be a CIDR block with its network address, e.g. 10.0.0.0/8",
    );
  });
});

describe('egressFetch', () => {
  it('refuses a loopback address before connecting, and a name that resolves to one when its socket connects', async () => {
    const before = hits;
    await expect(egressFetch(`http://127.0.0.1:${port}/`)).rejects.toMatchObject({
      code: 'ERR_BURROW_EGRESS_REFUSED',
      reason: 'loopback',
    });
    await expect(egressFetch(`http://localhost:${port}/`)).rejects.toBeInstanceOf(
      EgressRefusedError,
    );
    // A library's own request with the guarded agent is resolved by the same hook.
    const viaAgent = await new Promise<unknown>((resolve) => {
      get(`http://localhost:${port}/`, { agent: egressAgent('http:') })
        .once('response', () => resolve('answered'))
        .once('error', resolve);
    });
    expect(viaAgent).toBeInstanceOf(EgressRefusedError);
    expect(hits).toBe(before);
  });

  it('fetches an allowed address like fetch: status, headers, body, a form body sent', async () => {
    configureEgress({ allow: allow('127.0.0.1') });
    const res = await egressFetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      body: new URLSearchParams({ a: '1' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-two')).toBe('a');
    expect(await res.json()).toEqual({ ok: true });
    configureEgress({ allow: allow('localhost') });
    expect((await egressFetch(`http://localhost:${port}/`)).status).toBe(200);
  });
});
