/**
 * The PROXY protocol (HAProxy, versions 1 and 2) that a load balancer sends first on each
 * connection to say who the client is. Parsing (`src/edge/listeners/proxy-protocol-front.ts` applies it
 * to sockets) and encoding (an endpoint bound with `ProxyProto` 1 or 2 gets a header at the start of
 * each stream, src/edge/sessions/agent-tunnel.ts). Not to be confused with proxy-header.ts, the ngrok ProxyHeader sent to agents.
 * Spec: https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt
 */
import { isIP } from 'node:net';
import { ipv6Groups } from '../core/cidr.js';
import { BurrowError, CODES } from '../core/errors.js';
import { parseHostPort } from '../core/host-port.js';

/** The v2 signature: the 12 bytes every v2 header starts with. */
export const PROXY_V2_SIGNATURE = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');
/** A v1 line is at most 107 bytes, CRLF included. */
const PROXY_V1_MAX = 107;
/** The most bytes of a v2 header Burrow accepts (16-byte fixed part plus addresses and TLVs). */
const PROXY_V2_MAX = 16 + 1024;

/** The client's address as the load balancer saw it. */
export interface ProxiedAddress {
  address: string;
  port: number;
  family: 'IPv4' | 'IPv6';
}

/** A complete header: `source` is undefined for LOCAL (v2) and UNKNOWN (v1), e.g. health checks. */
export interface ProxyProtocolHeader {
  version: 1 | 2;
  source: ProxiedAddress | undefined;
  /** Bytes the header took; the connection's own bytes follow. */
  length: number;
}

/** A connection whose first bytes are not a valid PROXY protocol header. */
export class ProxyProtocolError extends BurrowError {
  constructor(message: string) {
    super(CODES.proxyProtocolInvalid, 400, message);
  }
}

function port(text: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) {
    throw new ProxyProtocolError(`PROXY v1: bad port '${text}'`);
  }
  return Number(text);
}

function parseV1(buf: Buffer): ProxyProtocolHeader | undefined {
  const end = buf.indexOf('\r\n');
  if (end < 0) {
    if (buf.length >= PROXY_V1_MAX) throw new ProxyProtocolError('PROXY v1: no CRLF in 107 bytes');
    return undefined;
  }
  if (end + 2 > PROXY_V1_MAX) throw new ProxyProtocolError('PROXY v1: line longer than 107 bytes');
  const parts = buf.subarray(0, end).toString('latin1').split(' ');
  if (parts[1] === 'UNKNOWN') return { version: 1, source: undefined, length: end + 2 };
  if (parts.length !== 6 || (parts[1] !== 'TCP4' && parts[1] !== 'TCP6')) {
    throw new ProxyProtocolError('PROXY v1: expected PROXY TCP4|TCP6 src dst sport dport');
  }
  const family = parts[1] === 'TCP4' ? 'IPv4' : 'IPv6';
  const want = family === 'IPv4' ? 4 : 6;
  if (isIP(parts[2]!) !== want || isIP(parts[3]!) !== want) {
    throw new ProxyProtocolError(`PROXY v1: addresses are not ${family}`);
  }
  port(parts[5]!);
  return {
    version: 1,
    source: { address: parts[2]!, port: port(parts[4]!), family },
    length: end + 2,
  };
}

function ipv6(bytes: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  // The URL parser writes IPv6 in its canonical short form (RFC 5952), as Node reports addresses.
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

function parseV2(buf: Buffer): ProxyProtocolHeader | undefined {
  if (buf.length < 16) return undefined;
  const verCmd = buf[12]!;
  if (verCmd >> 4 !== 2) throw new ProxyProtocolError('PROXY v2: version is not 2');
  const command = verCmd & 0x0f;
  if (command > 1) throw new ProxyProtocolError('PROXY v2: unknown command');
  const famProto = buf[13]!;
  const bodyLength = buf.readUInt16BE(14);
  if (16 + bodyLength > PROXY_V2_MAX) throw new ProxyProtocolError('PROXY v2: header too long');
  if (buf.length < 16 + bodyLength) return undefined;
  const length = 16 + bodyLength;
  const body = buf.subarray(16, length);
  // LOCAL: the balancer's own connection (health check); keep the socket's address.
  if (command === 0) return { version: 2, source: undefined, length };
  switch (famProto) {
    case 0x11: // TCP over IPv4
    case 0x12: // UDP over IPv4
      if (body.length < 12) throw new ProxyProtocolError('PROXY v2: IPv4 block too short');
      return {
        version: 2,
        source: {
          address: [...body.subarray(0, 4)].join('.'),
          port: body.readUInt16BE(8),
          family: 'IPv4',
        },
        length,
      };
    case 0x21: // TCP over IPv6
    case 0x22:
      if (body.length < 36) throw new ProxyProtocolError('PROXY v2: IPv6 block too short');
      return {
        version: 2,
        source: {
          address: ipv6(body.subarray(0, 16)),
          port: body.readUInt16BE(32),
          family: 'IPv6',
        },
        length,
      };
    default:
      // UNSPEC or UNIX sockets: nothing to say about the client's IP.
      return { version: 2, source: undefined, length };
  }
}

/**
 * Parse a PROXY protocol header at the start of `buf`: the header when complete, undefined when
 * more bytes are needed, ProxyProtocolError when the bytes cannot be one.
 * @example parseProxyProtocol(Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\n'))?.source?.address // '203.0.113.7'
 */
export function parseProxyProtocol(buf: Buffer): ProxyProtocolHeader | undefined {
  const v1 = Buffer.from('PROXY ');
  const prefixOf = (sig: Buffer) =>
    buf.subarray(0, sig.length).equals(sig.subarray(0, Math.min(buf.length, sig.length)));
  if (prefixOf(v1)) return buf.length < v1.length ? undefined : parseV1(buf);
  if (prefixOf(PROXY_V2_SIGNATURE)) {
    return buf.length < PROXY_V2_SIGNATURE.length ? undefined : parseV2(buf);
  }
  throw new ProxyProtocolError('the connection does not start with a PROXY protocol header');
}

/** 16 bytes of an IPv6 address (`::` shorthand, an IPv4 tail and a `%zone` allowed). */
function ipv6Bytes(text: string): Buffer {
  const out = Buffer.alloc(16);
  ipv6Groups(text).forEach((group, i) => out.writeUInt16BE(group, i * 2));
  return out;
}

const V2_LOCAL = Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x20, 0x00, 0x00, 0x00])]);

/**
 * A PROXY protocol header naming `source` (the client) and `destination` (the address it
 * connected to), as a proxy writes it first on the connection to its backend. Both must be of the
 * same family; when they are not, or `source` is unknown, the header says so (v1 `UNKNOWN`, v2
 * `LOCAL`), and the receiver keeps the connection's own addresses.
 * @example encodeProxyHeader(1, { address: '203.0.113.7', port: 51234, family: 'IPv4' }, { address: '10.0.0.1', port: 443, family: 'IPv4' }).toString() // 'PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\n'
 */
export function encodeProxyHeader(
  version: 1 | 2,
  source: ProxiedAddress | undefined,
  destination: ProxiedAddress | undefined,
): Buffer {
  const known =
    source !== undefined &&
    destination !== undefined &&
    source.family === destination.family &&
    isIP(source.address) === (source.family === 'IPv4' ? 4 : 6) &&
    isIP(destination.address) === (destination.family === 'IPv4' ? 4 : 6);
  if (version === 1) {
    if (!known) return Buffer.from('PROXY UNKNOWN\r\n', 'latin1');
    const tcp = source.family === 'IPv4' ? 'TCP4' : 'TCP6';
    const line = `PROXY ${tcp} ${source.address} ${destination.address} ${source.port} ${destination.port}\r\n`;
    return Buffer.from(line, 'latin1');
  }
  if (!known) return Buffer.from(V2_LOCAL);
  const v4 = source.family === 'IPv4';
  const bytes = (address: string): Buffer =>
    v4 ? Buffer.from(address.split('.').map(Number)) : ipv6Bytes(address);
  const block = Buffer.alloc(v4 ? 12 : 36);
  bytes(source.address).copy(block, 0);
  bytes(destination.address).copy(block, v4 ? 4 : 16);
  block.writeUInt16BE(source.port, v4 ? 8 : 32);
  block.writeUInt16BE(destination.port, v4 ? 10 : 34);
  const fixed = Buffer.from([0x21, v4 ? 0x11 : 0x21, 0, 0]);
  fixed.writeUInt16BE(block.length, 2);
  return Buffer.concat([PROXY_V2_SIGNATURE, fixed, block]);
}

/**
 * An `ip:port` text (IPv6 in brackets; an IPv4-mapped IPv6 address counts as IPv4) as a
 * ProxiedAddress, or undefined when it is not an IP address and a port.
 * @example proxiedAddress('[::ffff:203.0.113.7]:4567') // { address: '203.0.113.7', port: 4567, family: 'IPv4' }
 */
export function proxiedAddress(text: string | undefined): ProxiedAddress | undefined {
  const hostport = text === undefined ? undefined : parseHostPort(text);
  if (!hostport) return undefined;
  // Without an IPv6 zone (`%eth0`): the header has no room for it.
  const bare = hostport.host.replace(/%.*$/, '');
  const host = /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(bare) ? bare.slice(7) : bare;
  const kind = isIP(host);
  if (kind === 0) return undefined;
  return { address: host, port: hostport.port, family: kind === 4 ? 'IPv4' : 'IPv6' };
}
