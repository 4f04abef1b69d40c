/**
 * A DNS server for tests that plays two parts at once for the ACME test server (pebble, given
 * `-dnsserver 127.0.0.1:<port>`): the user's DNS provider, with a small mutable table of A/AAAA
 * and CNAME records, and the recursive resolver that follows a CNAME into a zone delegated to
 * Burrow's own DNS server by asking that server, as the real internet would.
 *
 * UDP only: pebble asks over UDP without EDNS, and the answers it needs (a CNAME and a few TXT
 * values, or one address) fit in 512 bytes.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { randomInt } from 'node:crypto';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, OptAnswer, Question } from 'dns-packet';
import {
  RCODE,
  UDP_EDNS_LIMIT,
  encodeWithin,
  isInZone,
  udpAnswerLimit,
} from '../../src/edge/certificates/dns-server.js';
import { parseListenAddress } from '../../src/core/host-port.js';
import { normalizeName } from '../../src/core/hostname.js';

/** A zone whose names are answered by asking its authoritative server. */
export interface DelegatedZone {
  /** e.g. `burrow.example.com` */
  zone: string;
  /** `host:port` of its authoritative server, e.g. Burrow's DNS server at `127.0.0.1:5353`. */
  address: string;
}

export interface TestResolverOptions {
  /** Default `127.0.0.1:0` (a free port). */
  listen?: string;
  /** The A answer for names not in the table; null answers NXDOMAIN for them. Default 127.0.0.1. */
  defaultA?: string | null;
  delegated?: DelegatedZone;
  /** How long to wait for the delegated zone's server before SERVFAIL; default 2000 ms. */
  upstreamTimeoutMs?: number;
}

export interface TestResolver {
  port: number;
  /** Replace the addresses of `name`: IPv4 ones answer A, IPv6 ones AAAA. */
  setA(name: string, ip: string | string[]): void;
  /** Make `name` a CNAME to `target` (replacing its addresses). */
  setCname(name: string, target: string): void;
  /** Forget `name`: it gets the default answer again. */
  delete(name: string): void;
  close(): Promise<void>;
}

type Entry = { addresses: string[] } | { cname: string };
interface Outcome {
  rcode: number;
  answers: Answer[];
}

const TTL = 5;
/** Longer CNAME chains are loops, as far as these tests go. */
const MAX_CHAIN = 8;

function edns(): OptAnswer {
  const opt = { udpPayloadSize: UDP_EDNS_LIMIT, extendedRcode: 0, ednsVersion: 0, flags: 0 };
  return { type: 'OPT', name: '.', ...opt, flag_do: false, options: [] };
}

/** One question to an authoritative server over UDP; SERVFAIL when it is silent or truncates. */
function askUpstream(address: string, question: Question, timeoutMs: number): Promise<Outcome> {
  const { host, port } = parseListenAddress(address);
  const id = randomInt(0x10000);
  const query = dnsPacket.encode({
    type: 'query',
    id,
    questions: [{ type: question.type, name: question.name, class: 'IN' }],
    additionals: [edns()],
  });
  const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.close();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish({ rcode: RCODE.SERVFAIL, answers: [] }), timeoutMs);
    socket.on('error', () => finish({ rcode: RCODE.SERVFAIL, answers: [] }));
    socket.on('message', (bytes) => {
      let reply: DecodedPacket;
      try {
        reply = dnsPacket.decode(bytes);
      } catch {
        return;
      }
      if (reply.id !== id || !reply.flag_qr) return;
      // A 1232-byte EDNS answer holds any challenge set these tests make; TC means a bug.
      if (reply.flag_tc) return finish({ rcode: RCODE.SERVFAIL, answers: [] });
      const answers = (reply.answers ?? []).filter((a) => a.type !== 'OPT');
      finish({ rcode: (reply.flags ?? 0) & 0xf, answers });
    });
    socket.send(query, port, host);
  });
}

/**
 * Start the test resolver.
 * @example
 * const resolver = await startTestResolver({
 *   delegated: { zone: 'burrow.example.com', address: `127.0.0.1:${dns.port}` },
 * });
 * resolver.setCname('_acme-challenge.sitea.example.com', 'kjrplmqa.acme-challenge.burrow.example.com');
 * // pebble -dnsserver 127.0.0.1:${resolver.port} now sees the TXT records Burrow serves.
 * await resolver.close();
 */
export async function startTestResolver(options: TestResolverOptions = {}): Promise<TestResolver> {
  const { host, port } = parseListenAddress(options.listen ?? '127.0.0.1:0');
  const defaultA = options.defaultA === undefined ? '127.0.0.1' : options.defaultA;
  const delegated = options.delegated && {
    zone: normalizeName(options.delegated.zone),
    address: options.delegated.address,
  };
  const timeoutMs = options.upstreamTimeoutMs ?? 2000;
  const table = new Map<string, Entry>();

  async function resolve(question: Question, depth: number): Promise<Outcome> {
    const name = normalizeName(question.name);
    if (depth > MAX_CHAIN) return { rcode: RCODE.SERVFAIL, answers: [] };
    if (delegated && isInZone(name, delegated.zone)) {
      return askUpstream(delegated.address, question, timeoutMs);
    }
    const entry = table.get(name);
    if (entry && 'cname' in entry) {
      const cname: Answer = { type: 'CNAME', name: question.name, ttl: TTL, data: entry.cname };
      if (question.type === 'CNAME') return { rcode: RCODE.NOERROR, answers: [cname] };
      const rest = await resolve({ ...question, name: entry.cname }, depth + 1);
      return { rcode: rest.rcode, answers: [cname, ...rest.answers] };
    }
    // No CAA anywhere: any CA may issue.
    if (question.type === 'CAA') return { rcode: RCODE.NOERROR, answers: [] };
    if (!entry && defaultA === null) return { rcode: RCODE.NXDOMAIN, answers: [] };
    const addresses = entry ? entry.addresses : [defaultA!];
    const type = question.type;
    if (type !== 'A' && type !== 'AAAA') return { rcode: RCODE.NOERROR, answers: [] };
    const answers: Answer[] = addresses
      .filter((ip) => net.isIP(ip) === (type === 'A' ? 4 : 6))
      .map((data) => ({ type, name: question.name, ttl: TTL, data }));
    return { rcode: RCODE.NOERROR, answers };
  }

  async function answer(bytes: Buffer): Promise<Buffer | undefined> {
    let query: DecodedPacket;
    try {
      query = dnsPacket.decode(bytes);
    } catch {
      return undefined;
    }
    if (query.flag_qr) return undefined;
    const questions = query.questions ?? [];
    const outcome =
      questions.length === 1
        ? await resolve(questions[0]!, 0)
        : { rcode: RCODE.FORMERR, answers: [] };
    const rd = (query.flags ?? 0) & dnsPacket.RECURSION_DESIRED;
    const flags = rd | dnsPacket.RECURSION_AVAILABLE | outcome.rcode;
    const response = { type: 'response' as const, id: query.id ?? 0, flags, questions };
    return encodeWithin({ ...response, answers: outcome.answers }, udpAnswerLimit(query));
  }

  const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(port, host, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  socket.on('error', () => undefined); // a test fixture must not bring the test run down
  socket.on('message', (bytes, peer) => {
    void answer(bytes)
      .then((reply) => reply && socket.send(reply, peer.port, peer.address))
      .catch(() => undefined);
  });

  let closing: Promise<void> | undefined;
  return {
    port: socket.address().port,
    setA: (name, ip) => void table.set(normalizeName(name), { addresses: [ip].flat() }),
    setCname: (name, target) =>
      void table.set(normalizeName(name), { cname: normalizeName(target) }),
    delete: (name) => void table.delete(normalizeName(name)),
    close: () => (closing ??= new Promise((resolve) => socket.close(() => resolve()))),
  };
}
