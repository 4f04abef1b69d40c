import { describe, expect, it } from 'vitest';
import {
  cidrContains,
  enclosingCidr,
  formatCidr,
  formatIpv6,
  ipAllowed,
  ipInCidr,
  ipv6Groups,
  ipv6ToBigInt,
  parseCidr,
  parseCidrCached,
  parseIp,
  type Cidr,
} from './cidr.js';

function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if ('problem' in parsed) throw new Error(`${text}: ${parsed.problem}`);
  return parsed;
}

describe('parseCidr', () => {
  it('parses IPv4 and IPv6 network blocks', () => {
    expect(cidr('10.0.0.0/8')).toMatchObject({ family: 4, network: 0x0a000000n, prefix: 8 });
    expect(cidr('0.0.0.0/0')).toMatchObject({ family: 4, network: 0n, prefix: 0 });
    expect(cidr('192.0.2.7/32')).toMatchObject({ family: 4, prefix: 32 });
    expect(cidr('2001:db8::/32')).toMatchObject({
      family: 6,
      network: 0x20010db8n << 96n,
      prefix: 32,
    });
    expect(cidr('::/0')).toMatchObject({ family: 6, network: 0n, prefix: 0 });
    expect(cidr('::1/128')).toMatchObject({ family: 6, network: 1n, prefix: 128 });
  });

  it('reports a bare address as a missing mask', () => {
    expect(parseCidr('10.0.0.1')).toEqual({ problem: 'missing-mask' });
    expect(parseCidr('2001:db8::1')).toEqual({ problem: 'missing-mask' });
  });

  it('reports an address inside the block as not the network address', () => {
    expect(parseCidr('10.0.0.1/8')).toEqual({ problem: 'not-network-address' });
    expect(parseCidr('2001:db8::1/64')).toEqual({ problem: 'not-network-address' });
  });

  it('refuses malformed text, prefixes out of range and zones', () => {
    for (const bad of [
      '',
      'nonsense',
      'nonsense/8',
      '10.0.0/8',
      '256.0.0.0/8',
      '10.0.0.0/33',
      '10.0.0.0/-1',
      '10.0.0.0/',
      '10.0.0.0/8/8',
      '10.0.0.0/1000',
      '2001:db8::/129',
      'fe80::%eth0/64',
      '10.0.0.0/ 8',
    ]) {
      expect(parseCidr(bad), bad).toEqual({ problem: 'invalid' });
    }
  });
});

describe('formatCidr and enclosingCidr', () => {
  it('writes canonical text: shortest IPv6, prefix without leading zeros', () => {
    expect(formatCidr(cidr('10.0.0.0/08'))).toBe('10.0.0.0/8');
    expect(formatCidr(cidr('2001:0DB8:0000:0000::/32'))).toBe('2001:db8::/32');
    expect(formatCidr(cidr('2001:db8:0:1:0:0:0:0/64'))).toBe('2001:db8:0:1::/64');
    // The longest zero run is compressed; a single zero group is not.
    expect(formatCidr(cidr('2001:0:0:1:0:0:0:0/128'))).toBe('2001:0:0:1::/128');
    expect(formatCidr(cidr('2001:db8:0:1:1:1:1:0/128'))).toBe('2001:db8:0:1:1:1:1:0/128');
    expect(formatCidr(cidr('::/0'))).toBe('::/0');
    expect(formatCidr(cidr('0:0:0:0:0:0:0:1/128'))).toBe('::1/128');
    expect(formatCidr(cidr('::ffff:10.0.0.0/104'))).toBe('::ffff:10.0.0.0/104');
  });

  it('finds the block an address with a mask lies in', () => {
    expect(enclosingCidr('10.1.2.3/8')).toBe('10.0.0.0/8');
    expect(enclosingCidr('192.168.1.77/26')).toBe('192.168.1.64/26');
    expect(enclosingCidr('2001:db8::1/64')).toBe('2001:db8::/64');
    expect(enclosingCidr('10.1.2.3')).toBeUndefined();
    expect(enclosingCidr('10.1.2.3/40')).toBeUndefined();
  });
});

describe('parseIp and cidrContains', () => {
  it('reads IPv4-mapped IPv6 as IPv4 and ignores zones', () => {
    expect(parseIp('::ffff:10.1.2.3')).toEqual({ family: 4, value: 0x0a010203n });
    expect(parseIp('fe80::1%eth0')).toEqual({ family: 6, value: (0xfe80n << 112n) | 1n });
    expect(parseIp('not an ip')).toBeUndefined();
  });

  it('matches addresses inside the block and of the same family only', () => {
    const block = cidr('10.0.0.0/8');
    expect(cidrContains(block, '10.255.255.255')).toBe(true);
    expect(cidrContains(block, '::ffff:10.9.9.9')).toBe(true);
    expect(cidrContains(block, '11.0.0.0')).toBe(false);
    expect(cidrContains(cidr('2001:db8::/32'), '2001:db8:ffff::1')).toBe(true);
    expect(cidrContains(cidr('2001:db8::/32'), '2001:db9::1')).toBe(false);
    expect(cidrContains(cidr('::/0'), '10.0.0.1')).toBe(false);
    expect(cidrContains(cidr('0.0.0.0/0'), '10.0.0.1')).toBe(true);
    // The same check on an address parsed once.
    const ip = parseIp('::ffff:10.9.9.9')!;
    expect(ipInCidr(ip, block)).toBe(true);
    expect(ipInCidr(ip, cidr('10.9.0.0/16'))).toBe(true);
    expect(ipInCidr(ip, cidr('11.0.0.0/8'))).toBe(false);
    expect(ipInCidr(ip, cidr('::/0'))).toBe(false);
  });
});

describe('formatIpv6', () => {
  it('writes RFC 5952 text, an IPv4-mapped address dotted or (as @peculiar/x509) in hex', () => {
    expect(formatIpv6(ipv6ToBigInt('2001:DB8:0:0:1:0:0:1'))).toBe('2001:db8::1:0:0:1');
    expect(formatIpv6(ipv6ToBigInt('0:0:0:0:0:0:0:0'))).toBe('::');
    expect(formatIpv6(ipv6ToBigInt('0:0:0:0:0:FFFF:C000:201'))).toBe('::ffff:192.0.2.1');
    expect(formatIpv6(ipv6ToBigInt('::ffff:192.0.2.1'), 'hex')).toBe('::ffff:c000:201');
  });
});

describe('ipv6Groups', () => {
  it('expands ::, an IPv4 tail and drops a zone', () => {
    expect(ipv6Groups('2001:db8::1')).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups('::')).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(ipv6Groups('1::')).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(ipv6Groups('2001:0DB8:0:0:0:0:0:00ff')).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xff]);
    expect(ipv6Groups('::ffff:192.0.2.1')).toEqual([0, 0, 0, 0, 0, 0xffff, 0xc000, 0x201]);
    expect(ipv6Groups('1:2:3:4:5:6:1.2.3.4')).toEqual([1, 2, 3, 4, 5, 6, 0x102, 0x304]);
    expect(ipv6Groups('fe80::1%eth0')).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
  });
});

describe('parseCidrCached', () => {
  it('gives what parseCidr gives, the same object each time', () => {
    expect(parseCidrCached('10.0.0.0/8')).toEqual(parseCidr('10.0.0.0/8'));
    expect(parseCidrCached('10.0.0.0/8')).toBe(parseCidrCached('10.0.0.0/8'));
    expect(parseCidrCached('10.0.0.1/8')).toEqual({ problem: 'not-network-address' });
  });
});

describe('ipAllowed', () => {
  const rules = [
    { cidr: '10.0.0.0/8', action: 'allow' as const },
    { cidr: '10.9.0.0/16', action: 'deny' as const },
    { cidr: '2001:db8::/32', action: 'allow' as const },
  ];

  it('allows an address that matches an allow rule and no deny rule', () => {
    expect(ipAllowed(rules, '10.1.2.3')).toBe(true);
    expect(ipAllowed(rules, '2001:db8::5')).toBe(true);
  });

  it('refuses an address that matches a deny rule, even if an allow rule matches too', () => {
    expect(ipAllowed(rules, '10.9.1.1')).toBe(false);
    // Order does not matter: deny wins wherever it is.
    expect(ipAllowed([...rules].reverse(), '10.9.1.1')).toBe(false);
  });

  it('refuses an address no allow rule matches, and everything when there are no rules', () => {
    expect(ipAllowed(rules, '192.0.2.1')).toBe(false);
    expect(ipAllowed([{ cidr: '10.0.0.0/8', action: 'deny' }], '192.0.2.1')).toBe(false);
    expect(ipAllowed([], '10.1.2.3')).toBe(false);
    expect(ipAllowed(rules, 'garbage')).toBe(false);
  });

  it('lets an unparsable rule match nothing', () => {
    expect(ipAllowed([{ cidr: 'nonsense', action: 'allow' }], '10.0.0.1')).toBe(false);
  });
});
