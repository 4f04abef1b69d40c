import { describe, expect, it } from 'vitest';
import { replayBytes } from './replay.js';
import type { CapturedRequest } from './request-log.js';

function captured(raw: string): CapturedRequest {
  const bytes = Buffer.from(raw, 'latin1');
  return {
    uri: '/api/requests/http/a1',
    id: 'a1',
    tunnel_name: 'command_line',
    remote_addr: '203.0.113.7',
    start: new Date(0).toISOString(),
    duration: 0,
    request: {
      method: 'POST',
      uri: '/hook',
      proto: 'HTTP/1.1',
      headers: {},
      raw: bytes.toString('base64'),
      size: bytes.length,
      truncated: false,
    },
    response: null,
  };
}

const ORIGINAL = 'POST /hook HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi';

describe('replayBytes', () => {
  it('sends the captured bytes as they were, or rebuilt with the changes', () => {
    expect(replayBytes(captured(ORIGINAL), undefined).toString('latin1')).toBe(ORIGINAL);
    expect(
      replayBytes(captured(ORIGINAL), { body: 'hello', headers: { 'X-A': ['1', '2'] } }).toString(
        'latin1',
      ),
    ).toBe(
      'POST /hook HTTP/1.1\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello',
    );
  });

  it('refuses a header or target that cannot be written into a head: any control character', () => {
    for (const [name, value] of [
      ['X-A', 'a\r\nInjected: 1'],
      ['X-A', 'nul\0byte'],
      ['Bad Name', 'v'],
    ] as const) {
      expect(() => replayBytes(captured(ORIGINAL), { headers: { [name]: value } })).toThrow(
        /^headers: (a control character in the value of X-A|an invalid header name "Bad Name")$/,
      );
    }
    for (const uri of ['/a b', '/a\x7f', '/a\0']) {
      expect(() => replayBytes(captured(ORIGINAL), { uri })).toThrow(
        /^uri: must be a request target/,
      );
    }
  });
});
