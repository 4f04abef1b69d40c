import { isIP } from 'node:net';

/** A parsed CIDR block: address family, network bits as a bigint, prefix length. */
export interface Cidr {
  family: 4 | 6;
  network: bigint;
  prefix: number;
  text: string;
}

export type CidrProblem = 'invalid' | 'missing-mask' | 'not-network-address';

function ipv4ToBigInt(ip: string): bigint {
  return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function ipv6ToBigInt(ip: string): bigint {
  let text = ip;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const n = ipv4ToBigInt(v4[1]!);
    text =
      text.slice(0, -v4[1]!.length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const fill = tail === undefined ? 0 : 8 - headParts.length - tailParts.length;
  const parts = [...headParts, ...Array<string>(fill).fill('0'), ...tailParts];
  return parts.reduce((acc, part) => (acc << 16n) | BigInt(parseInt(part, 16)), 0n);
}

/** An IP address as family and bigint, or undefined when `ip` is not an address. */
export function parseIp(ip: string): { family: 4 | 6; value: bigint } | undefined {
  const family = isIP(ip);
  if (family === 4) return { family: 4, value: ipv4ToBigInt(ip) };
  if (family === 6) {
    const value = ipv6ToBigInt(ip);
    // IPv4-mapped IPv6 (::ffff:a.b.c.d) is checked as IPv4, as sockets report it for dual-stack.
    if (value >> 32n === 0xffffn) return { family: 4, value: value & 0xffffffffn };
    return { family: 6, value };
  }
  return undefined;
}

/** Parse `a.b.c.d/n` or `x::/n`; the address must be the first of its block. */
export function parseCidr(text: string): Cidr | { problem: CidrProblem } {
  const slash = text.indexOf('/');
  if (slash < 0) return { problem: isIP(text) ? 'missing-mask' : 'invalid' };
  const addr = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  const family = isIP(addr);
  if (family !== 4 && family !== 6) return { problem: 'invalid' };
  if (!/^\d{1,3}$/.test(prefixText)) return { problem: 'invalid' };
  const prefix = Number(prefixText);
  const bits = family === 4 ? 32 : 128;
  if (prefix > bits) return { problem: 'invalid' };
  const value = family === 4 ? ipv4ToBigInt(addr) : ipv6ToBigInt(addr);
  const hostBits = BigInt(bits - prefix);
  const network = (value >> hostBits) << hostBits;
  if (network !== value) return { problem: 'not-network-address' };
  return { family, network, prefix, text };
}

/** True when `ip` lies inside `cidr`. */
export function cidrContains(cidr: Cidr, ip: string): boolean {
  const parsed = parseIp(ip);
  if (!parsed || parsed.family !== cidr.family) return false;
  const hostBits = BigInt((cidr.family === 4 ? 32 : 128) - cidr.prefix);
  return parsed.value >> hostBits === cidr.network >> hostBits;
}
