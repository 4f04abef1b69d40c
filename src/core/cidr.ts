import { isIP } from 'node:net';
import { LRUCache } from 'lru-cache';

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

/** The 16-bit groups of `text`, a piece of IPv6 text between `::`s: hex groups, an IPv4 tail as two. */
function hextets(text: string, out: number[]): void {
  if (text === '') return;
  for (const part of text.split(':')) {
    if (part.includes('.')) {
      const [a = 0, b = 0, c = 0, d = 0] = part.split('.').map(Number);
      out.push((a << 8) | b, (c << 8) | d);
    } else {
      out.push(parseInt(part, 16));
    }
  }
}

/**
 * The eight 16-bit groups of an IPv6 address: `::` expanded, an IPv4 tail (`::ffff:1.2.3.4`) as
 * two groups, a `%zone` ignored. `address` must be one (`isIP(address) === 6`); other text gives
 * garbage, not an error.
 * @example ipv6Groups('2001:db8::1') // [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]
 * @example ipv6Groups('::ffff:192.0.2.1') // [0, 0, 0, 0, 0, 0xffff, 0xc000, 0x201]
 */
export function ipv6Groups(address: string): number[] {
  const zone = address.indexOf('%');
  const ip = zone < 0 ? address : address.slice(0, zone);
  const gap = ip.indexOf('::');
  const groups: number[] = [];
  if (gap < 0) {
    hextets(ip, groups);
    return groups;
  }
  const right: number[] = [];
  hextets(ip.slice(0, gap), groups);
  hextets(ip.slice(gap + 2), right);
  for (let i = groups.length + right.length; i < 8; i++) groups.push(0);
  for (const group of right) groups.push(group);
  return groups;
}

/** The 128 bits of an IPv6 address (`isIP(ip) === 6`), an IPv4-mapped one as it is written. */
export function ipv6ToBigInt(ip: string): bigint {
  let value = 0n;
  for (const group of ipv6Groups(ip)) value = (value << 16n) | BigInt(group);
  return value;
}

/** An IP address as parseIp gives it: family and value (IPv4-mapped IPv6 as IPv4). */
export interface ParsedIp {
  family: 4 | 6;
  value: bigint;
}

/** An IP address as family and bigint, or undefined when `ip` is not an address. */
export function parseIp(address: string): ParsedIp | undefined {
  // A zone (fe80::1%eth0) names an interface, not part of the address.
  const ip = address.includes('%') ? address.slice(0, address.indexOf('%')) : address;
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
  // Zones (fe80::%eth0) pass isIP but are not part of a network address.
  if ((family !== 4 && family !== 6) || addr.includes('%')) return { problem: 'invalid' };
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

const parsedCidrs = new LRUCache<string, Cidr | { problem: CidrProblem }>({ max: 4096 });

/**
 * parseCidr, remembered for the 4096 texts used last: for blocks parsed again on every request
 * (IP policy rules, CEL's inCidrRange). The result is shared: do not change it.
 * @example parseCidrCached('10.0.0.0/8') === parseCidrCached('10.0.0.0/8') // true
 */
export function parseCidrCached(text: string): Cidr | { problem: CidrProblem } {
  let parsed = parsedCidrs.get(text);
  if (parsed === undefined) {
    parsed = parseCidr(text);
    parsedCidrs.set(text, parsed);
  }
  return parsed;
}

/**
 * True when the parsed address `ip` lies inside `cidr` (of the other family: false). For checks
 * made per connection or request: parse the address once, then test it against each block.
 * @example ipInCidr(parseIp('10.1.2.3')!, parseCidrCached('10.0.0.0/8') as Cidr) // true
 */
export function ipInCidr(ip: ParsedIp, cidr: Cidr): boolean {
  if (ip.family !== cidr.family) return false;
  const hostBits = BigInt((cidr.family === 4 ? 32 : 128) - cidr.prefix);
  return ip.value >> hostBits === cidr.network >> hostBits;
}

/** True when `ip` (text) lies inside `cidr`. */
export function cidrContains(cidr: Cidr, ip: string): boolean {
  const parsed = parseIp(ip);
  return parsed !== undefined && ipInCidr(parsed, cidr);
}

function formatIpv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

/**
 * RFC 5952 text: lowercase, no leading zeros, the first longest run of two or more zero groups as
 * `::`. An IPv4-mapped address ends in its IPv4 address (`::ffff:192.0.2.1`), or with `mapped:
 * 'hex'` in two hex groups (`::ffff:c000:201`), as @peculiar/x509 and WHATWG URLs write it.
 * @example formatIpv6(ipv6ToBigInt('2001:DB8:0:0:0:0:0:1')) // '2001:db8::1'
 */
export function formatIpv6(value: bigint, mapped: 'dotted' | 'hex' = 'dotted'): string {
  if (mapped === 'dotted' && value >> 32n === 0xffffn) {
    return `::ffff:${formatIpv4(value & 0xffffffffn)}`;
  }
  const groups = Array.from({ length: 8 }, (_, i) => (value >> BigInt((7 - i) * 16)) & 0xffffn);
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0n) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0n) j++;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  const hex = (gs: bigint[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

/**
 * The canonical text of a block: the network address in its shortest form (IPv6 per RFC 5952)
 * and the prefix without leading zeros, so equal blocks have equal text.
 * @example formatCidr(parseCidr('2001:DB8:0:0::/32') as Cidr) // '2001:db8::/32'
 */
export function formatCidr(cidr: Pick<Cidr, 'family' | 'network' | 'prefix'>): string {
  const addr = cidr.family === 4 ? formatIpv4(cidr.network) : formatIpv6(cidr.network);
  return `${addr}/${cidr.prefix}`;
}

/**
 * The block that an address with a mask lies in, as canonical text; undefined when `text` is not
 * an address and a valid prefix. Used to suggest the right network address for `10.0.0.1/8`.
 * @example enclosingCidr('10.1.2.3/8') // '10.0.0.0/8'
 */
export function enclosingCidr(text: string): string | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addr = text.slice(0, slash);
  const prefixText = text.slice(slash + 1);
  const family = isIP(addr);
  if ((family !== 4 && family !== 6) || addr.includes('%') || !/^\d{1,3}$/.test(prefixText)) {
    return undefined;
  }
  const prefix = Number(prefixText);
  const bits = family === 4 ? 32 : 128;
  if (prefix > bits) return undefined;
  const value = family === 4 ? ipv4ToBigInt(addr) : ipv6ToBigInt(addr);
  const hostBits = BigInt(bits - prefix);
  return formatCidr({ family, network: (value >> hostBits) << hostBits, prefix });
}

/** One rule of an IP policy, as the ip_restriction module evaluates it. */
export interface IpRule {
  cidr: string;
  action: 'allow' | 'deny';
}

/**
 * Whether `ip` may connect under `rules` (the rules of every policy on the endpoint, combined):
 * only when it matches at least one allow rule and no deny rule. No rules, no access.
 * @example ipAllowed([{ cidr: '10.0.0.0/8', action: 'allow' }, { cidr: '10.9.0.0/16', action: 'deny' }], '10.1.2.3') // true
 */
export function ipAllowed(rules: readonly IpRule[], ip: string): boolean {
  const addr = parseIp(ip);
  if (!addr) return false;
  let allowed = false;
  for (const rule of rules) {
    const cidr = parseCidrCached(rule.cidr);
    // Stored rules are validated; an unparsable one must not widen access, so it matches nothing.
    if ('problem' in cidr || !ipInCidr(addr, cidr)) continue;
    if (rule.action === 'deny') return false;
    allowed = true;
  }
  return allowed;
}
