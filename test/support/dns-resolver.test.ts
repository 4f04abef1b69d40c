import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import dnsPacket from 'dns-packet';
import type { DecodedPacket, RecordType } from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '../../src/edge/certificates/dns-server.js';
import { startTestResolver, type TestResolver } from './dns-resolver.js';

const ZONE = 'burrow.example.com';
const TARGET = `kjrplmqa.acme-challenge.${ZONE}`;
const challenges = new Map<string, string[]>([[TARGET, ['digest-one', 'digest-two']]]);

let authority: DnsServer;
let resolver: TestResolver;
let lookup: Resolver;

beforeAll(async () => {
  authority = await startDnsServer({
    listen: '127.0.0.1:0',
    zone: ZONE,
    records: { txt: async (name) => challenges.get(name) ?? [] },
  });
  resolver = await startTestResolver({
    delegated: { zone: ZONE, address: `127.0.0.1:${authority.port}` },
  });
  lookup = new Resolver({ timeout: 2000, tries: 1 });
  lookup.setServers([`127.0.0.1:${resolver.port}`]);
});
afterAll(async () => {
  await resolver.close();
  await authority.close();
});

function ask(port: number, name: string, type: RecordType): Promise<DecodedPacket> {
  const query = dnsPacket.encode({ type: 'query', id: 42, questions: [{ type, name }] });
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error('no answer'));
    }, 3000);
    socket.on('message', (reply) => {
      clearTimeout(timer);
      socket.close();
      resolve(dnsPacket.decode(reply));
    });
    socket.send(query, port, '127.0.0.1');
  });
}

describe('test resolver', () => {
  it('answers the default A for any name, and table entries instead once set', async () => {
    expect(await lookup.resolve4('anything.example.net')).toEqual(['127.0.0.1']);
    await expect(lookup.resolve6('anything.example.net')).rejects.toMatchObject({
      code: 'ENODATA',
    });
    resolver.setA('Site.Example.com', ['10.1.2.3', '::1']);
    expect(await lookup.resolve4('site.example.com')).toEqual(['10.1.2.3']);
    expect(await lookup.resolve6('site.example.com')).toEqual(['::1']);
    resolver.delete('site.example.com');
    expect(await lookup.resolve4('site.example.com')).toEqual(['127.0.0.1']);
  });

  it('follows a CNAME into the delegated zone like a recursive resolver', async () => {
    resolver.setCname('_acme-challenge.sitea.example.com', TARGET);
    const reply = await ask(resolver.port, '_acme-challenge.sitea.example.com', 'TXT');
    expect(reply.flag_ra).toBe(true);
    expect(reply.answers?.map((a) => [a.type, a.name])).toEqual([
      ['CNAME', '_acme-challenge.sitea.example.com'],
      ['TXT', TARGET],
      ['TXT', TARGET],
    ]);
    const txt = await lookup.resolveTxt('_acme-challenge.sitea.example.com');
    expect(txt.flat().sort()).toEqual(['digest-one', 'digest-two']);
    // A pending challenge appears at once: the authority is asked every time.
    challenges.set(TARGET, ['digest-three']);
    expect((await lookup.resolveTxt('_acme-challenge.sitea.example.com')).flat()).toEqual([
      'digest-three',
    ]);
  });

  it('forwards questions under the delegated zone, NXDOMAIN included', async () => {
    expect((await lookup.resolveTxt(TARGET)).flat()).toEqual(['digest-three']);
    expect((await lookup.resolveSoa(ZONE)).nsname).toBe(`ns.${ZONE}`);
    const missing = await ask(resolver.port, `nothing.${ZONE}`, 'TXT');
    expect((missing.flags ?? 0) & 0xf).toBe(3);
  });

  it('answers CAA with an empty NOERROR and follows CNAMEs inside its own table', async () => {
    const caa = await ask(resolver.port, 'sitea.example.com', 'CAA');
    expect([(caa.flags ?? 0) & 0xf, caa.answers?.length]).toEqual([0, 0]);
    resolver.setA('origin.example.com', '10.9.9.9');
    resolver.setCname('www.example.com', 'origin.example.com');
    expect(await lookup.resolve4('www.example.com')).toEqual(['10.9.9.9']);
    resolver.setCname('loop-a.example.com', 'loop-b.example.com');
    resolver.setCname('loop-b.example.com', 'loop-a.example.com');
    const loop = await ask(resolver.port, 'loop-a.example.com', 'A');
    expect((loop.flags ?? 0) & 0xf).toBe(2);
  });

  it('answers NXDOMAIN for unknown names without a default, SERVFAIL when the authority is silent', async () => {
    const silent = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', resolve));
    const strict = await startTestResolver({
      defaultA: null,
      delegated: { zone: ZONE, address: `127.0.0.1:${silent.address().port}` },
      upstreamTimeoutMs: 200,
    });
    try {
      expect(((await ask(strict.port, 'x.example.net', 'A')).flags ?? 0) & 0xf).toBe(3);
      expect(((await ask(strict.port, TARGET, 'TXT')).flags ?? 0) & 0xf).toBe(2);
    } finally {
      await strict.close();
      silent.close();
    }
  });
});
