import { describe, expect, it } from 'vitest';
import { parseProxyProtocol, PROXY_V2_SIGNATURE, ProxyProtocolError } from './proxy-protocol.js';

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
