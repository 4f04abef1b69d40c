/**
 * Burrow's own authoritative DNS server for its base domain: TXT records of pending ACME DNS-01
 * challenges (users CNAME `_acme-challenge.<their name>` to a name under the base domain), and,
 * when the operator delegates the base domain to Burrow, A/AAAA for every name under it.
 *
 * Every byte of a DNS message is read and written by `dns-packet`; this file only frames TCP
 * messages (a 2-byte length) and decides what to answer.
 */
import dgram from 'node:dgram';
import type { EventEmitter } from 'node:events';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, OptAnswer, Packet, Question, SoaAnswer } from 'dns-packet';
import type { Logger } from '../../core/logger.js';
import { parseListenAddress } from '../../core/host-port.js';
import { normalizeName } from '../../core/hostname.js';

/** Where TXT answers come from (pending ACME challenges). */
export interface DnsRecordSource {
  /** `name` is a lowercase FQDN without the trailing dot; [] when it has no TXT records. */
  txt(name: string): Promise<string[]>;
}

export interface DnsServerOptions {
  /** `host:port` (`[::1]:53` for IPv6), UDP and TCP on the same port; port 0 picks a free one. */
  listen: string;
  /** The zone we are authoritative for (the base domain), e.g. `burrow.example.com`. */
  zone: string;
  /** The NS host name of SOA and NS answers; default `ns.<zone>`. */
  nameserver?: string;
  /** When set, A (IPv4 ones) and AAAA (IPv6 ones) answers for the apex and every name under it. */
  publicIps?: string[];
  /** TXT lookups; called for TXT questions, and to tell NXDOMAIN from NODATA for other types. */
  records: DnsRecordSource;
  /**
   * TTL of SOA, NS, A and AAAA answers; default 60. TXT answers and negative answers (the SOA
   * minimum) use min(ttl, 5): a challenge must be visible seconds after it is created, even to a
   * resolver that asked before it existed.
   */
  ttl?: number;
  /**
   * Names that exist although nothing is stored at them, because names under them may have
   * records (RFC 8020: an NXDOMAIN there would hide everything below from resolvers that
   * minimise query names). Default: `acme-challenge.<zone>`, the parent of challenge targets.
   */
  emptyNonTerminals?: string[];
  /** Open TCP connections at most; default 256. */
  maxTcpConnections?: number;
  /** A TCP connection that completes no query for this long is closed; default 10 s. */
  tcpIdleTimeoutMs?: number;
  logger?: Logger;
}

export interface DnsServer {
  /** The IP address bound (as Node reports it, e.g. `127.0.0.1` or `::1`). */
  address: string;
  port: number;
  close(): Promise<void>;
}

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 };
const AA = dnsPacket.AUTHORITATIVE_ANSWER;
const TC = dnsPacket.TRUNCATED_RESPONSE;
/** Bits a response copies from its query: the opcode, RD and CD (RFC 1035 4.1.1, RFC 4035). */
const ECHOED_FLAGS = 0x7800 | dnsPacket.RECURSION_DESIRED | dnsPacket.CHECKING_DISABLED;
/** BADVERS is extended RCODE 16; its upper 8 bits live in the OPT record. */
const BADVERS_HIGH_BITS = 1;

/** Without EDNS a UDP answer must fit in 512 bytes (RFC 1035). */
const UDP_CLASSIC_LIMIT = 512;
/** DNS flag day 2020: larger UDP answers risk IP fragmentation, so clients retry over TCP. */
export const UDP_EDNS_LIMIT = 1232;
const TCP_MESSAGE_LIMIT = 0xffff;
/** Queries are small; a bigger length prefix is garbage or abuse, and closes the connection. */
const MAX_TCP_QUERY_BYTES = 4096;
/** Queries read ahead on one TCP connection before we stop reading it. */
const TCP_PIPELINE_LIMIT = 32;
/** Answer bytes a TCP client may leave unread before we give up on it. */
const TCP_UNREAD_LIMIT = 256 * 1024;
/** UDP queries answered at once; more are dropped (the resolver retries) rather than queued. */
const UDP_INFLIGHT_LIMIT = 1024;
/** TCP connections one client address may hold, so one client cannot take every slot. */
const MAX_TCP_PER_PEER = 16;
const MAX_TCP_LIFETIME_MS = 120_000;
const TXT_TTL = 5;

/**
 * True when `name` is `zone` or under it (both normalized).
 * @example isInZone('x.burrow.example.com', 'burrow.example.com') // true
 */
export function isInZone(name: string, zone: string): boolean {
  return name === zone || name.endsWith('.' + zone);
}

/**
 * A TXT value as character-strings of at most 255 bytes each: dns-packet writes one length byte
 * per string and would corrupt a longer one.
 * @example txtStrings('a'.repeat(300)).map((b) => b.length) // [255, 45]
 */
export function txtStrings(value: string): Buffer[] {
  const bytes = Buffer.from(value);
  const strings: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) strings.push(bytes.subarray(i, i + 255));
  return strings.length > 0 ? strings : [Buffer.alloc(0)];
}

/**
 * The largest UDP answer the asker accepts: 512, or its EDNS payload size capped at 1232.
 * @example udpAnswerLimit(dnsPacket.decode(query))
 */
export function udpAnswerLimit(query: Packet): number {
  const opt = query.additionals?.find((a): a is OptAnswer => a.type === 'OPT');
  if (!opt) return UDP_CLASSIC_LIMIT;
  return Math.min(Math.max(opt.udpPayloadSize, UDP_CLASSIC_LIMIT), UDP_EDNS_LIMIT);
}

/**
 * Encode `response`; when it is longer than `limit`, encode only its header, question and OPT
 * record with TC set instead, so that the asker retries over TCP.
 * @example encodeWithin(response, 512)
 */
export function encodeWithin(response: Packet, limit: number): Buffer {
  const full = dnsPacket.encode(response);
  if (full.length <= limit) return full;
  return dnsPacket.encode({
    ...response,
    flags: (response.flags ?? 0) | TC,
    answers: [],
    authorities: [],
    additionals: (response.additionals ?? []).filter((a) => a.type === 'OPT'),
  });
}

/** Reads the id and flags of a packet dns-packet cannot decode whole, so it can get FORMERR. */
function readHeader(packet: Buffer): DecodedPacket | undefined {
  if (packet.length < 12) return undefined;
  // Zeroed section counts make dns-packet decode the id and flags alone.
  const header = Buffer.alloc(12);
  packet.copy(header, 0, 0, 4);
  try {
    return dnsPacket.decode(header);
  } catch {
    return undefined;
  }
}

function ednsOpt(extendedRcode = 0): OptAnswer {
  const opt = { udpPayloadSize: UDP_EDNS_LIMIT, extendedRcode, ednsVersion: 0, flags: 0 };
  return { type: 'OPT', name: '.', ...opt, flag_do: false, options: [] };
}

export type Transport = 'udp' | 'tcp';

/**
 * The answering half of the server, without sockets: a query's bytes in, the answer's bytes out
 * (undefined: send nothing). It never rejects.
 * @example const answer = createDnsAnswerer({ zone: 'burrow.example.com', records });
 * const reply = await answer(queryBytes, 'udp');
 */
export function createDnsAnswerer(
  options: Omit<DnsServerOptions, 'listen'>,
): (query: Buffer, transport: Transport) => Promise<Buffer | undefined> {
  const zone = normalizeName(options.zone);
  const nameserver = normalizeName(options.nameserver ?? `ns.${zone}`);
  const ttl = options.ttl ?? 60;
  const shortTtl = Math.min(ttl, TXT_TTL);
  const ipv4 = (options.publicIps ?? []).filter((ip) => net.isIPv4(ip));
  const ipv6 = (options.publicIps ?? []).filter((ip) => net.isIPv6(ip));
  const everyNameExists = ipv4.length + ipv6.length > 0;
  const emptyNonTerminals = new Set(
    (options.emptyNonTerminals ?? [`acme-challenge.${zone}`]).map(normalizeName),
  );
  // Seconds since the epoch at start: each restart (which may change the records) counts up.
  const serial = Math.floor(Date.now() / 1000) >>> 0;
  const soa: SoaAnswer = {
    type: 'SOA',
    name: zone,
    ttl,
    data: {
      mname: nameserver,
      rname: `hostmaster.${zone}`,
      serial,
      refresh: 3600,
      retry: 600,
      expire: 86400,
      minimum: shortTtl,
    },
  };
  const addresses = (name: string, type: 'A' | 'AAAA'): Answer[] =>
    (type === 'A' ? ipv4 : ipv6).map((data) => ({ type, name, ttl, data }));

  interface Outcome {
    rcode: number;
    aa: boolean;
    answers?: Answer[];
    authorities?: Answer[];
    additionals?: Answer[];
  }

  async function resolve(q: Question): Promise<Outcome> {
    const name = normalizeName(q.name);
    const inClass = q.class === undefined || q.class === 'IN' || q.class === 'ANY';
    if (!inClass || !isInZone(name, zone)) return { rcode: RCODE.REFUSED, aa: false };
    // No zone transfers: the zone is computed per question; there is no list of names to send.
    if (q.type === 'AXFR' || q.type === 'IXFR') return { rcode: RCODE.REFUSED, aa: false };
    const apex = name === zone;
    let txt: string[] | undefined;
    let answers: Answer[] = [];
    let additionals: Answer[] = [];
    if (q.type === 'SOA' && apex) answers = [{ ...soa, name: q.name }];
    if (q.type === 'NS' && apex) {
      answers = [{ type: 'NS', name: q.name, ttl, data: nameserver }];
      // Glue, so a resolver need not ask us again for the address of the name it asked us by.
      if (isInZone(nameserver, zone)) {
        additionals = [...addresses(nameserver, 'A'), ...addresses(nameserver, 'AAAA')];
      }
    }
    if (q.type === 'A' || q.type === 'AAAA') answers = addresses(q.name, q.type);
    if (q.type === 'TXT') {
      txt = await options.records.txt(name);
      answers = txt.map((v) => ({ type: 'TXT', name: q.name, ttl: shortTtl, data: txtStrings(v) }));
    }
    if (answers.length > 0) return { rcode: RCODE.NOERROR, aa: true, answers, additionals };
    const exists =
      apex ||
      everyNameExists ||
      emptyNonTerminals.has(name) ||
      (txt ?? (await options.records.txt(name))).length > 0;
    const rcode = exists ? RCODE.NOERROR : RCODE.NXDOMAIN;
    return { rcode, aa: true, authorities: [{ ...soa, ttl: shortTtl }] };
  }

  const answer = async (bytes: Buffer, transport: Transport): Promise<Buffer | undefined> => {
    let query: DecodedPacket;
    try {
      query = dnsPacket.decode(bytes);
    } catch (err) {
      const header = readHeader(bytes);
      options.logger?.debug({ err: (err as Error).message, transport }, 'malformed DNS query');
      if (!header || header.flag_qr) return undefined;
      const flags = ((header.flags ?? 0) & ECHOED_FLAGS) | RCODE.FORMERR;
      return dnsPacket.encode({ type: 'response', id: header.id ?? 0, flags });
    }
    // Never answer an answer: two servers could otherwise bounce packets for ever.
    if (query.flag_qr) return undefined;
    const questions = query.questions ?? [];
    const opts = (query.additionals ?? []).filter((a): a is OptAnswer => a.type === 'OPT');
    const opt = opts[0];
    const limit = transport === 'tcp' ? TCP_MESSAGE_LIMIT : udpAnswerLimit(query);
    const reply = (outcome: Outcome, echoQuestion = true): Buffer => {
      let rcode = outcome.rcode;
      const additionals = [...(outcome.additionals ?? [])];
      if (opt) additionals.push(ednsOpt(rcode >> 4));
      rcode &= 0xf;
      const flags = ((query.flags ?? 0) & ECHOED_FLAGS) | (outcome.aa ? AA : 0) | rcode;
      const response: Packet = {
        type: 'response',
        id: query.id ?? 0,
        flags,
        questions: echoQuestion ? questions : [],
        answers: outcome.answers ?? [],
        authorities: outcome.authorities ?? [],
        additionals,
      };
      return encodeWithin(response, limit);
    };

    const opcode = ((query.flags ?? 0) >> 11) & 0xf;
    if (opcode !== 0) return reply({ rcode: RCODE.NOTIMP, aa: false }, questions.length === 1);
    if (questions.length !== 1 || opts.length > 1 || (opt && opt.name !== '.')) {
      return reply({ rcode: RCODE.FORMERR, aa: false }, false);
    }
    if (opt && opt.ednsVersion > 0) return reply({ rcode: BADVERS_HIGH_BITS << 4, aa: false });
    try {
      const answer = reply(await resolve(questions[0]!));
      if (answer.length <= TCP_MESSAGE_LIMIT) return answer;
      options.logger?.warn({ name: questions[0]!.name }, 'DNS answer over 64 KiB: SERVFAIL');
    } catch (err) {
      const name = questions[0]!.name;
      options.logger?.warn({ err: (err as Error).message, name }, 'DNS lookup failed: SERVFAIL');
    }
    return reply({ rcode: RCODE.SERVFAIL, aa: false });
  };
  // A socket handler must never see a rejection; a reply we cannot build is not sent.
  return (bytes, transport) =>
    answer(bytes, transport).catch((err: Error) => {
      options.logger?.warn({ err: err.message, transport }, 'DNS answer failed: dropped');
      return undefined;
    });
}

/** Runs `start` and settles once it calls back, or at the first 'error' before that. */
function started(emitter: EventEmitter, start: (done: () => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    emitter.once('error', reject);
    start(() => {
      emitter.off('error', reject);
      resolve();
    });
  });
}

/** Binds UDP, then TCP on the port UDP got; with port 0 it retries while TCP finds it taken. */
async function bindBoth(host: string, port: number): Promise<[dgram.Socket, net.Server]> {
  for (let attempt = 1; ; attempt++) {
    const udp = dgram.createSocket({ type: net.isIPv6(host) ? 'udp6' : 'udp4' });
    await started(udp, (done) => udp.bind(port, host, done)).catch((err: Error) => {
      udp.close();
      throw err;
    });
    const tcp = net.createServer();
    try {
      // The address UDP bound, so that a name such as `localhost` means the same for both.
      const bound = udp.address();
      await started(tcp, (done) => tcp.listen({ host: bound.address, port: bound.port }, done));
      return [udp, tcp];
    } catch (err) {
      udp.close();
      const inUse = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
      if (port !== 0 || !inUse || attempt >= 10) throw err;
    }
  }
}

/**
 * Start the authoritative DNS server on UDP and TCP.
 * @example
 * const dns = await startDnsServer({
 *   listen: '0.0.0.0:53', zone: 'burrow.example.com', publicIps: ['203.0.113.7'],
 *   records: { txt: async (name) => challenges.get(name) ?? [] },
 * });
 * await dns.close();
 */
export async function startDnsServer(options: DnsServerOptions): Promise<DnsServer> {
  const { host, port } = parseListenAddress(options.listen);
  const logger = options.logger;
  const answer = createDnsAnswerer(options);
  const maxConnections = options.maxTcpConnections ?? 256;
  const idleMs = options.tcpIdleTimeoutMs ?? 10_000;
  const [udp, tcp] = await bindBoth(host, port);
  const connections = new Set<net.Socket>();
  const perPeer = new Map<string, number>();
  let inflight = 0;

  udp.on('error', (err) => logger?.warn({ err: err.message }, 'DNS UDP socket error'));
  udp.on('message', (query, peer) => {
    if (inflight >= UDP_INFLIGHT_LIMIT) return;
    inflight++;
    void answer(query, 'udp')
      .then((reply) => {
        if (!reply) return;
        udp.send(reply, peer.port, peer.address, (err) => {
          if (err) logger?.debug({ err: err.message, peer: peer.address }, 'DNS UDP send failed');
        });
      })
      // send() throws synchronously once the socket is closed.
      .catch((err: Error) => logger?.debug({ err: err.message }, 'DNS UDP answer dropped'))
      .finally(() => inflight--);
  });

  tcp.on('error', (err) => logger?.warn({ err: err.message }, 'DNS TCP server error'));
  tcp.on('connection', (socket) => {
    socket.on('error', (err) => logger?.debug({ err: err.message }, 'DNS TCP connection error'));
    const peer = socket.remoteAddress ?? '';
    const mine = perPeer.get(peer) ?? 0;
    if (connections.size >= maxConnections || mine >= MAX_TCP_PER_PEER) {
      logger?.debug({ peer }, 'too many DNS TCP connections: refused');
      socket.destroy();
      return;
    }
    connections.add(socket);
    perPeer.set(peer, mine + 1);
    socket.once('close', () => {
      const left = (perPeer.get(peer) ?? 1) - 1;
      if (left > 0) perPeer.set(peer, left);
      else perPeer.delete(peer);
    });
    // Resolvers reconnect as they need; no connection holds a slot for ever.
    setTimeout(() => socket.destroy(), MAX_TCP_LIFETIME_MS).unref();
    serveTcp(socket);
  });

  function serveTcp(socket: net.Socket): void {
    let buffered = Buffer.alloc(0);
    const queue: Buffer[] = [];
    let busy = false;
    // Reset per answered query, not per byte, so a client trickling bytes cannot hold a slot.
    let idle = setTimeout(() => socket.destroy(), idleMs).unref();
    socket.on('close', () => {
      clearTimeout(idle);
      connections.delete(socket);
    });
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2) {
        const length = buffered.readUInt16BE(0);
        if (length === 0 || length > MAX_TCP_QUERY_BYTES) return void socket.destroy();
        if (buffered.length < 2 + length) break;
        queue.push(buffered.subarray(2, 2 + length));
        buffered = buffered.subarray(2 + length);
      }
      if (queue.length >= TCP_PIPELINE_LIMIT) socket.pause();
      drain().catch(() => socket.destroy());
    });

    async function drain(): Promise<void> {
      if (busy) return;
      busy = true;
      while (queue.length > 0 && !socket.destroyed) {
        const reply = await answer(queue.shift()!, 'tcp');
        // Without a readable header the stream has lost its framing: nothing after it is sound.
        if (!reply) return void socket.destroy();
        if (socket.destroyed) break;
        const length = Buffer.alloc(2);
        length.writeUInt16BE(reply.length);
        socket.write(Buffer.concat([length, reply]));
        if (socket.writableLength > TCP_UNREAD_LIMIT) return void socket.destroy();
        clearTimeout(idle);
        idle = setTimeout(() => socket.destroy(), idleMs).unref();
      }
      busy = false;
      if (socket.isPaused() && !socket.destroyed) socket.resume();
    }
  }

  let closing: Promise<void> | undefined;
  const bound = udp.address();
  logger?.info({ address: bound.address, port: bound.port, zone: options.zone }, 'DNS listening');
  return {
    address: bound.address,
    port: bound.port,
    close: () => {
      closing ??= (async () => {
        for (const socket of connections) socket.destroy();
        await Promise.all([
          new Promise<void>((resolve) => udp.close(() => resolve())),
          new Promise<void>((resolve) => tcp.close(() => resolve())),
        ]);
      })();
      return closing;
    },
  };
}
