import dgram from 'node:dgram';
import net from 'node:net';
import { Resolver } from 'node:dns/promises';
import { randomBytes } from 'node:crypto';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet, RecordType } from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RCODE,
  createDnsAnswerer,
  encodeWithin,
  startDnsServer,
  txtStrings,
  udpAnswerLimit,
  type DnsServer,
} from './dns-server.js';
import { parseListenAddress } from '../../core/host-port.js';

const ZONE = 'burrow.example.com';
const CHALLENGE = `kjrplmqa.acme-challenge.${ZONE}`;
const BIG = `big.acme-challenge.${ZONE}`;
const records = new Map<string, string[]>([
  [CHALLENGE, ['token-one', 'token-two', 'token-three']],
  [BIG, Array.from({ length: 40 }, (_, i) => `${i}-`.padEnd(100, 'x'))],
]);
const asked: string[] = [];
const source = {
  txt: async (name: string): Promise<string[]> => {
    asked.push(name);
    if (name.startsWith('fail.')) throw new Error('store is down');
    return records.get(name) ?? [];
  },
};

let dns: DnsServer;
let withIps: DnsServer;

beforeAll(async () => {
  dns = await startDnsServer({ listen: '127.0.0.1:0', zone: ZONE, records: source });
  withIps = await startDnsServer({
    listen: '127.0.0.1:0',
    zone: ZONE,
    records: source,
    publicIps: ['203.0.113.7', '2001:db8::7'],
  });
});
afterAll(async () => {
  await dns.close();
  await withIps.close();
});

let nextId = 1;
// @types/dns-packet leaves out ANY, which dns-packet itself encodes.
function query(name: string, type: RecordType | 'ANY', extra: Partial<Packet> = {}): Buffer {
  const id = nextId++ & 0xffff;
  const flags = dnsPacket.RECURSION_DESIRED;
  const questions = [{ type: type as RecordType, name }];
  return dnsPacket.encode({ type: 'query', id, flags, questions, ...extra });
}

const dataOf = (a: Answer | undefined): unknown => (a && 'data' in a ? a.data : undefined);

function udpExchange(port: number, bytes: Buffer, timeoutMs = 1000): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    const finish = (reply: Buffer | undefined): void => {
      clearTimeout(timer);
      socket.close();
      resolve(reply);
    };
    socket.on('error', reject);
    socket.on('message', (reply) => finish(reply));
    socket.send(bytes, port, '127.0.0.1');
  });
}

async function ask(port: number, bytes: Buffer): Promise<DecodedPacket> {
  const reply = await udpExchange(port, bytes);
  if (!reply) throw new Error('no UDP answer');
  return dnsPacket.decode(reply);
}

/** Sends `chunks` on one TCP connection; resolves with the answers read until the server closes. */
function tcpExchange(port: number, chunks: Buffer[], answers: number): Promise<DecodedPacket[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buffered = Buffer.alloc(0);
    const out: DecodedPacket[] = [];
    const done = (): void => {
      socket.destroy();
      resolve(out);
    };
    socket.on('error', reject);
    socket.on('close', done);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        out.push(dnsPacket.decode(buffered.subarray(2, 2 + buffered.readUInt16BE(0))));
        buffered = buffered.subarray(2 + buffered.readUInt16BE(0));
      }
      if (out.length >= answers) done();
    });
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
    });
  });
}

function framed(message: Buffer): Buffer {
  return dnsPacket.streamEncode(dnsPacket.decode(message));
}

const rcode = (p: Packet): number => (p.flags ?? 0) & 0xf;
const txtValues = (p: Packet): string[] =>
  (p.answers ?? []).flatMap((a) =>
    a.type === 'TXT' ? [Buffer.concat(a.data as Buffer[]).toString()] : [],
  );

describe('authoritative answers', () => {
  it('answers SOA and NS at the apex', async () => {
    const soa = await ask(dns.port, query(ZONE, 'SOA'));
    expect(rcode(soa)).toBe(RCODE.NOERROR);
    expect(soa.flag_aa).toBe(true);
    expect(soa.flag_rd).toBe(true);
    expect(soa.answers).toHaveLength(1);
    const data = dataOf(soa.answers?.[0]) as dnsPacket.SoaData;
    expect(data.mname).toBe(`ns.${ZONE}`);
    expect(data.rname).toBe(`hostmaster.${ZONE}`);
    expect(data.serial).toBeGreaterThan(1_700_000_000);
    const ns = await ask(dns.port, query(ZONE, 'NS'));
    expect(ns.answers?.map(dataOf)).toEqual([`ns.${ZONE}`]);
  });

  it('answers TXT records of a challenge name, several values, short TTL', async () => {
    const reply = await ask(dns.port, query(CHALLENGE, 'TXT'));
    expect(rcode(reply)).toBe(RCODE.NOERROR);
    expect(reply.flag_aa).toBe(true);
    expect(txtValues(reply).sort()).toEqual(['token-one', 'token-three', 'token-two']);
    expect(reply.answers?.every((a) => a.type === 'TXT' && a.ttl === 5)).toBe(true);
  });

  it('matches names case-insensitively and echoes the question as asked', async () => {
    const mixed = 'KJRPLMQA.Acme-Challenge.BURROW.Example.COM';
    asked.length = 0;
    const reply = await ask(dns.port, query(mixed, 'TXT'));
    expect(asked).toEqual([CHALLENGE]);
    expect(reply.questions?.[0]?.name).toBe(mixed);
    expect(reply.answers?.[0]?.name).toBe(mixed);
    expect(txtValues(reply)).toHaveLength(3);
  });

  it('answers A and AAAA from publicIps for the apex and any name under the zone', async () => {
    const a = await ask(withIps.port, query(`random-name.${ZONE}`, 'A'));
    expect(a.answers?.map(dataOf)).toEqual(['203.0.113.7']);
    const aaaa = await ask(withIps.port, query(ZONE, 'AAAA'));
    expect(aaaa.answers?.map(dataOf)).toEqual(['2001:db8::7']);
    const mx = await ask(withIps.port, query(`random-name.${ZONE}`, 'MX'));
    expect([rcode(mx), mx.answers?.length, mx.authorities?.[0]?.type]).toEqual([0, 0, 'SOA']);
  });

  it('without publicIps: NXDOMAIN for unknown names, NODATA for the apex and named ones', async () => {
    const unknown = await ask(dns.port, query(`nothing-here.${ZONE}`, 'A'));
    expect(rcode(unknown)).toBe(RCODE.NXDOMAIN);
    expect(unknown.flag_aa).toBe(true);
    expect(unknown.authorities?.map((a) => [a.type, a.name])).toEqual([['SOA', ZONE]]);
    for (const [name, type] of [
      [ZONE, 'A'],
      [CHALLENGE, 'A'],
      [`acme-challenge.${ZONE}`, 'A'],
      [CHALLENGE, 'ANY'],
    ] as const) {
      const reply = await ask(dns.port, query(name, type));
      expect([name, rcode(reply), reply.answers?.length]).toEqual([name, RCODE.NOERROR, 0]);
      expect(reply.authorities?.[0]?.type).toBe('SOA');
    }
  });

  it('refuses names outside the zone and zone transfers', async () => {
    for (const name of ['example.com', 'evilburrow.example.com', 'example.org', '.']) {
      const reply = await ask(dns.port, query(name, 'A'));
      expect([name, rcode(reply), reply.flag_aa]).toEqual([name, RCODE.REFUSED, false]);
    }
    expect(rcode(await ask(dns.port, query(ZONE, 'AXFR')))).toBe(RCODE.REFUSED);
  });

  it('answers SERVFAIL when the record source fails, and carries on', async () => {
    const reply = await ask(dns.port, query(`fail.${ZONE}`, 'TXT'));
    expect(rcode(reply)).toBe(RCODE.SERVFAIL);
    expect(txtValues(await ask(dns.port, query(CHALLENGE, 'TXT')))).toHaveLength(3);
  });
});

describe('EDNS, truncation and TCP', () => {
  it('sets TC over UDP for a large answer and gives it whole over TCP', async () => {
    const udp = await ask(dns.port, query(BIG, 'TXT'));
    expect(udp.flag_tc).toBe(true);
    expect(udp.answers).toHaveLength(0);
    expect(udp.questions?.[0]?.name).toBe(BIG);
    const [tcp] = await tcpExchange(dns.port, [framed(query(BIG, 'TXT'))], 1);
    expect(tcp?.flag_tc).toBe(false);
    expect(txtValues(tcp!)).toHaveLength(40);
  });

  it('honours the EDNS payload size up to 1232 and answers with an OPT record', async () => {
    const opt = { type: 'OPT' as const, name: '.', udpPayloadSize: 4096, flags: 0 };
    const edns = query(CHALLENGE, 'TXT', { additionals: [opt as dnsPacket.OptAnswer] });
    const reply = await ask(dns.port, edns);
    const answerOpt = reply.additionals?.find((a) => a.type === 'OPT') as dnsPacket.OptAnswer;
    expect(answerOpt.udpPayloadSize).toBe(1232);
    expect(udpAnswerLimit(dnsPacket.decode(edns))).toBe(1232);
    expect(udpAnswerLimit(dnsPacket.decode(query(ZONE, 'A')))).toBe(512);
    const bad = { ...opt, ednsVersion: 1 } as dnsPacket.OptAnswer;
    const badvers = await ask(dns.port, query(ZONE, 'A', { additionals: [bad] }));
    const badOpt = badvers.additionals?.find((a) => a.type === 'OPT') as dnsPacket.OptAnswer;
    expect([rcode(badvers), badOpt.extendedRcode]).toEqual([0, 1]); // BADVERS = 16
  });

  it('answers several queries on one TCP connection, even split across writes', async () => {
    const both = Buffer.concat([framed(query(ZONE, 'SOA')), framed(query(CHALLENGE, 'TXT'))]);
    const answers = await tcpExchange(dns.port, [both.subarray(0, 5), both.subarray(5)], 2);
    expect(answers.map((a) => a.answers?.[0]?.type)).toEqual(['SOA', 'TXT']);
  });

  it('closes TCP connections that stay idle, and refuses them over the cap', async () => {
    const server = await startDnsServer({
      listen: '127.0.0.1:0',
      zone: ZONE,
      records: source,
      tcpIdleTimeoutMs: 200,
      maxTcpConnections: 1,
    });
    try {
      const first = net.connect(server.port, '127.0.0.1');
      const firstClosed = new Promise((resolve) => first.on('close', resolve));
      first.on('error', () => undefined);
      await new Promise((resolve) => first.on('connect', resolve));
      await new Promise((resolve) => setTimeout(resolve, 50));
      // The only slot is taken: the second connection is closed with no answer.
      expect(await tcpExchange(server.port, [framed(query(ZONE, 'SOA'))], 1)).toEqual([]);
      await firstClosed;
      const [soa] = await tcpExchange(server.port, [framed(query(ZONE, 'SOA'))], 1);
      expect(soa?.answers?.[0]?.type).toBe('SOA');
    } finally {
      await server.close();
    }
  });
});

describe('one client cannot take every TCP slot', () => {
  it('refuses a seventeenth connection from one address while others still get in', async () => {
    const server = await startDnsServer({ listen: '127.0.0.1:0', zone: ZONE, records: source });
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 16; i++) {
        const socket = net.connect(server.port, '127.0.0.1');
        socket.on('error', () => undefined);
        await new Promise((resolve) => socket.on('connect', resolve));
        held.push(socket);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      // Same address (127.0.0.1): refused. Another loopback address: served.
      expect(await tcpExchange(server.port, [framed(query(ZONE, 'SOA'))], 1)).toEqual([]);
      const other = net.connect({
        port: server.port,
        host: '127.0.0.1',
        localAddress: '127.0.0.2',
      });
      other.on('error', () => undefined);
      await new Promise((resolve) => other.on('connect', resolve));
      other.write(framed(query(ZONE, 'SOA')));
      const reply = await new Promise<Buffer>((resolve) => other.once('data', resolve));
      expect(dnsPacket.decode(reply.subarray(2)).answers?.[0]?.type).toBe('SOA');
      other.destroy();
    } finally {
      for (const socket of held) socket.destroy();
      await server.close();
    }
  });
});

describe('bad input', () => {
  it('answers NOTIMP to other opcodes and FORMERR to zero or several questions', async () => {
    const notify = dnsPacket.encode({
      type: 'query',
      id: 7,
      flags: 4 << 11,
      questions: [{ type: 'SOA', name: ZONE }],
    });
    const notimp = await ask(dns.port, notify);
    expect([rcode(notimp), notimp.id, ((notimp.flags ?? 0) >> 11) & 0xf]).toEqual([4, 7, 4]);
    const none = await ask(dns.port, dnsPacket.encode({ type: 'query', id: 8, questions: [] }));
    expect(rcode(none)).toBe(RCODE.FORMERR);
    const two = query(ZONE, 'A', {
      questions: [
        { type: 'A', name: ZONE },
        { type: 'TXT', name: CHALLENGE },
      ],
    });
    expect(rcode(await ask(dns.port, two))).toBe(RCODE.FORMERR);
  });

  it('survives malformed UDP packets and keeps answering', async () => {
    for (let i = 0; i < 50; i++) {
      await udpExchange(dns.port, randomBytes(1 + (i % 40)), 20);
    }
    // Too short for a header: dropped.
    expect(await udpExchange(dns.port, randomBytes(5), 200)).toBeUndefined();
    // A header that promises a question the packet does not hold: FORMERR with the id echoed.
    const promised = dnsPacket.encode({ type: 'query', id: 0x1234, questions: [] });
    promised.writeUInt16BE(1, 4);
    const formerr = await ask(dns.port, promised);
    expect([rcode(formerr), formerr.id, formerr.questions?.length]).toEqual([1, 0x1234, 0]);
    // A question name that is a compression pointer to itself.
    const loop = Buffer.concat([promised, Buffer.from([0xc0, 12, 0, 1, 0, 1])]);
    expect(rcode(await ask(dns.port, loop))).toBe(RCODE.FORMERR);
    // A response is never answered.
    const response = dnsPacket.encode({ type: 'response', id: 9, questions: [] });
    expect(await udpExchange(dns.port, response, 200)).toBeUndefined();
    expect(txtValues(await ask(dns.port, query(CHALLENGE, 'TXT')))).toHaveLength(3);
  });

  it('survives TCP garbage and keeps answering', async () => {
    const closers = [
      Buffer.concat([Buffer.from([0xff, 0xff]), randomBytes(3000)]), // over the size cap
      Buffer.from([0, 0]), // an empty message
      Buffer.from([0, 3, 1, 2, 3]), // no readable header: the framing is lost
    ];
    for (const chunk of closers) expect(await tcpExchange(dns.port, [chunk], 1)).toEqual([]);
    // Garbage after a readable header gets FORMERR, and the connection goes on.
    const garbage = randomBytes(40);
    garbage.writeUInt16BE(0x4321, 0);
    garbage.writeUInt16BE(0x0000, 2); // a standard query...
    garbage.writeUInt16BE(0xffff, 4); // ...of 65535 questions it does not hold
    const length = Buffer.from([0, garbage.length]);
    const chunks = [length, garbage, framed(query(ZONE, 'SOA'))];
    const [formerr, soa] = await tcpExchange(dns.port, chunks, 2);
    expect([rcode(formerr!), formerr?.id]).toEqual([RCODE.FORMERR, 0x4321]);
    expect(soa?.answers?.[0]?.type).toBe('SOA');
    expect(rcode(await ask(dns.port, query(ZONE, 'SOA')))).toBe(RCODE.NOERROR);
  });
});

describe("Node's resolver end to end", () => {
  it('resolves SOA, TXT (falling back to TCP on TC) and A', async () => {
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([`127.0.0.1:${dns.port}`]);
    expect((await resolver.resolveSoa(ZONE)).nsname).toBe(`ns.${ZONE}`);
    expect((await resolver.resolveTxt(CHALLENGE)).flat().sort()).toEqual([
      'token-one',
      'token-three',
      'token-two',
    ]);
    expect(await resolver.resolveTxt(BIG)).toHaveLength(40);
    await expect(resolver.resolve4(`nothing.${ZONE}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    const withIpsResolver = new Resolver({ timeout: 2000, tries: 1 });
    withIpsResolver.setServers([`127.0.0.1:${withIps.port}`]);
    expect(await withIpsResolver.resolve4(`abc123.${ZONE}`)).toEqual(['203.0.113.7']);
    expect(await withIpsResolver.resolve6(`abc123.${ZONE}`)).toEqual(['2001:db8::7']);
  });
});

describe('helpers', () => {
  it('parses listen addresses', () => {
    expect(parseListenAddress('127.0.0.1:53')).toEqual({ host: '127.0.0.1', port: 53 });
    expect(parseListenAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(() => parseListenAddress('127.0.0.1')).toThrow(/host:port/);
    expect(() => parseListenAddress('[::1]:70000')).toThrow(/host:port/);
  });

  it('splits long TXT values into 255-byte strings', async () => {
    expect(txtStrings('a'.repeat(600)).map((b) => b.length)).toEqual([255, 255, 90]);
    expect(txtStrings('')).toEqual([Buffer.alloc(0)]);
    const answer = createDnsAnswerer({
      zone: ZONE,
      records: { txt: async () => ['b'.repeat(300)] },
    });
    const reply = await answer(query(CHALLENGE, 'TXT'), 'tcp');
    expect(txtValues(dnsPacket.decode(reply!))).toEqual(['b'.repeat(300)]);
  });

  it('encodeWithin keeps a small answer whole and truncates a large one', () => {
    const packet: Packet = {
      type: 'response',
      id: 1,
      questions: [{ type: 'TXT', name: ZONE }],
      answers: [{ type: 'TXT', name: ZONE, ttl: 5, data: 'x'.repeat(200) }],
    };
    expect(dnsPacket.decode(encodeWithin(packet, 512)).flag_tc).toBe(false);
    const cut = dnsPacket.decode(encodeWithin(packet, 100));
    expect([cut.flag_tc, cut.answers?.length, cut.questions?.length]).toEqual([true, 0, 1]);
  });

  it('listens on IPv6 loopback when the host has it', async () => {
    let server: DnsServer;
    try {
      server = await startDnsServer({ listen: '[::1]:0', zone: ZONE, records: source });
    } catch {
      return; // no IPv6 on this machine
    }
    try {
      expect(server.address).toBe('::1');
      const resolver = new Resolver({ timeout: 2000, tries: 1 });
      resolver.setServers([`[::1]:${server.port}`]);
      expect((await resolver.resolveSoa(ZONE)).nsname).toBe(`ns.${ZONE}`);
    } finally {
      await server.close();
    }
  });
});
