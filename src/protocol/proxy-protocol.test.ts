import { describe, expect, it } from 'vitest';
import {
  encodeProxyHeader,
  parseProxyProtocol,
  proxiedAddress,
  PROXY_V2_SIGNATURE,
  ProxyProtocolError,
  type ProxiedAddress,
} from './proxy-protocol.js';

/** A v2 header: command 1 (PROXY) or 0 (LOCAL), family/protocol byte, address block. */
function v2(command: number, famProto: number, block: Buffer): Buffer {
  const fixed = Buffer.alloc(4);
  fixed[0] = 0x20 | command;
  fixed[1] = famProto;
  fixed.writeUInt16BE(block.length, 2);
  return Buffer.concat([PROXY_V2_SIGNATURE, fixed, block]);
}

function ipv4Block(src: number[], dst: number[], sport: number, dport: number): Buffer {
  const b = Buffer.alloc(12);
  Buffer.from(src).copy(b, 0);
  Buffer.from(dst).copy(b, 4);
  b.writeUInt16BE(sport, 8);
  b.writeUInt16BE(dport, 10);
  return b;
}

describe('parseProxyProtocol', () => {
  it('reads v1 TCP4, TCP6 and UNKNOWN, and says how long the header was', () => {
    const line = 'PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\n';
    expect(parseProxyProtocol(Buffer.from(line + 'GET / HTTP/1.1\r\n'))).toEqual({
      version: 1,
      source: { address: '203.0.113.7', port: 51234, family: 'IPv4' },
      length: line.length,
    });
    expect(
      parseProxyProtocol(Buffer.from('PROXY TCP6 2001:db8::7 2001:db8::1 4000 80\r\n'))?.source,
    ).toEqual({ address: '2001:db8::7', port: 4000, family: 'IPv6' });
    expect(parseProxyProtocol(Buffer.from('PROXY UNKNOWN\r\n'))).toMatchObject({
      source: undefined,
      length: 15,
    });
  });

  it('reads v2 PROXY over IPv4 and IPv6 (TLVs skipped) and LOCAL', () => {
    const block = Buffer.concat([
      ipv4Block([198, 51, 100, 9], [10, 0, 0, 1], 40000, 8443),
      Buffer.from([0x04, 0x00, 0x01, 0xff]), // a TLV, ignored
    ]);
    const header = v2(1, 0x11, block);
    expect(parseProxyProtocol(Buffer.concat([header, Buffer.from('\x16\x03\x01')]))).toEqual({
      version: 2,
      source: { address: '198.51.100.9', port: 40000, family: 'IPv4' },
      length: header.length,
    });
    const six = Buffer.alloc(36);
    Buffer.from('20010db8000000000000000000000007', 'hex').copy(six, 0);
    six.writeUInt16BE(5555, 32);
    expect(parseProxyProtocol(v2(1, 0x21, six))?.source).toEqual({
      address: '2001:db8::7',
      port: 5555,
      family: 'IPv6',
    });
    expect(parseProxyProtocol(v2(0, 0x00, Buffer.alloc(0)))).toMatchObject({
      version: 2,
      source: undefined,
      length: 16,
    });
  });

  it('asks for more bytes while a header is incomplete', () => {
    const full = v2(1, 0x11, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2));
    for (let n = 0; n < full.length; n++) {
      expect(parseProxyProtocol(full.subarray(0, n))).toBeUndefined();
    }
    expect(parseProxyProtocol(Buffer.from('PROXY TCP4 1.2.3.4'))).toBeUndefined();
  });

  it('refuses what is not a valid header', () => {
    for (const bad of [
      'GET / HTTP/1.1\r\n',
      '\x16\x03\x01\x02\x00',
      'PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n',
      'PROXY TCP4 ::1 ::1 1 2\r\n',
      'PROXY TCP4 1.2.3.4 5.6.7.8 99999 2\r\n',
      'PROXY TCP4 ' + '1'.repeat(120),
    ]) {
      expect(() => parseProxyProtocol(Buffer.from(bad, 'latin1')), bad).toThrow(ProxyProtocolError);
    }
    const wrongVersion = v2(1, 0x11, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2));
    wrongVersion[12] = 0x11;
    expect(() => parseProxyProtocol(wrongVersion)).toThrow(ProxyProtocolError);
    expect(() => parseProxyProtocol(v2(1, 0x11, Buffer.alloc(4)))).toThrow(/too short/);
  });
});

describe('encodeProxyHeader', () => {
  const v4src: ProxiedAddress = { address: '203.0.113.7', port: 51234, family: 'IPv4' };
  const v4dst: ProxiedAddress = { address: '10.0.0.1', port: 443, family: 'IPv4' };
  const v6src: ProxiedAddress = { address: '2001:db8::7', port: 4000, family: 'IPv6' };
  const v6dst: ProxiedAddress = { address: '::ffff:10.0.0.1', port: 80, family: 'IPv6' };

  it('writes v1 TCP4 and TCP6 lines that parse back', () => {
    const four = encodeProxyHeader(1, v4src, v4dst);
    expect(four.toString('latin1')).toBe('PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\n');
    expect(parseProxyProtocol(Buffer.concat([four, Buffer.from('GET /')]))).toEqual({
      version: 1,
      source: v4src,
      length: four.length,
    });
    const six = encodeProxyHeader(1, v6src, v6dst);
    expect(six.toString('latin1')).toBe('PROXY TCP6 2001:db8::7 ::ffff:10.0.0.1 4000 80\r\n');
    expect(parseProxyProtocol(six)).toEqual({ version: 1, source: v6src, length: six.length });
  });

  it('writes v2 PROXY blocks over IPv4 and IPv6 that parse back, the destination included', () => {
    const four = encodeProxyHeader(2, v4src, v4dst);
    expect(four.subarray(0, 16)).toEqual(
      Buffer.concat([PROXY_V2_SIGNATURE, Buffer.from([0x21, 0x11, 0x00, 0x0c])]),
    );
    expect(four.subarray(16)).toEqual(ipv4Block([203, 0, 113, 7], [10, 0, 0, 1], 51234, 443));
    expect(parseProxyProtocol(Buffer.concat([four, Buffer.from([0x16])]))).toEqual({
      version: 2,
      source: v4src,
      length: 28,
    });
    const six = encodeProxyHeader(2, v6src, v6dst);
    expect(six.length).toBe(16 + 36);
    expect(six[13]).toBe(0x21);
    expect(six.subarray(16, 32).toString('hex')).toBe('20010db8000000000000000000000007');
    expect(six.subarray(32, 48).toString('hex')).toBe('00000000000000000000ffff0a000001');
    expect(six.readUInt16BE(48)).toBe(4000);
    expect(six.readUInt16BE(50)).toBe(80);
    expect(parseProxyProtocol(six)).toEqual({ version: 2, source: v6src, length: 52 });
    const full = encodeProxyHeader(
      2,
      { address: '1:2:3:4:5:6:7:8', port: 1, family: 'IPv6' },
      { address: '::', port: 2, family: 'IPv6' },
    );
    expect(parseProxyProtocol(full)?.source?.address).toBe('1:2:3:4:5:6:7:8');
    expect(full.subarray(32, 48)).toEqual(Buffer.alloc(16));
  });

  it('says UNKNOWN (v1) or LOCAL (v2) without a usable source or with mixed families', () => {
    for (const [src, dst] of [
      [undefined, v4dst],
      [v4src, v6dst],
      [{ address: 'a', port: 1, family: 'IPv4' }, v4dst],
    ] as [ProxiedAddress | undefined, ProxiedAddress][]) {
      expect(encodeProxyHeader(1, src, dst).toString()).toBe('PROXY UNKNOWN\r\n');
      const local = encodeProxyHeader(2, src, dst);
      expect(local[12]).toBe(0x20);
      expect(parseProxyProtocol(local)).toEqual({ version: 2, source: undefined, length: 16 });
    }
  });
});

describe('proxiedAddress', () => {
  it('reads ip:port, IPv6 in brackets, IPv4-mapped as IPv4; not names or missing ports', () => {
    expect(proxiedAddress('203.0.113.7:4567')).toEqual({
      address: '203.0.113.7',
      port: 4567,
      family: 'IPv4',
    });
    expect(proxiedAddress('[2001:db8::1]:443')).toEqual({
      address: '2001:db8::1',
      port: 443,
      family: 'IPv6',
    });
    expect(proxiedAddress('[::ffff:127.0.0.1]:80')?.address).toBe('127.0.0.1');
    expect(proxiedAddress('example.com:80')).toBeUndefined();
    expect(proxiedAddress('203.0.113.7')).toBeUndefined();
    expect(proxiedAddress(undefined)).toBeUndefined();
  });
});
