import { describe, expect, it } from 'vitest';
import { responsePairs, TrafficLog } from '../../metrics/traffic-log.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import { parseRequestHead } from './request-head.js';
import { trafficExchangeTap } from './traffic-tap.js';

// The tap reads only the tunnel's id.
const tunnel = { id: 'tn_tap' } as OnlineTunnel;

/** A request with every credential the log redacts, as the relay parses and records it. */
const CREDENTIALS_HEAD =
  'GET /login HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer secret\r\nCookie: sid=secret\r\n' +
  'Proxy-Authorization: Basic secret\r\nX-Api-Key: secret\r\n\r\n';
const CREDENTIALS_RESPONSE = [
  'Set-Cookie',
  'sid=secret; Path=/; HttpOnly',
  'Set-Cookie',
  'other=secret',
  'X-Api-Key',
  'secret',
];

type Bodies = ReturnType<ReturnType<typeof trafficExchangeTap>['begin']>['bodies'];

/**
 * Record one exchange of `text` answered with `response` through the tap, as the relay does:
 * `feed` gets the bodies to copy into (undefined when the host captures none) before the end.
 */
/** The values of response header `name` (lower-case) as the inspector shows them. */
function valuesOf(raw: readonly string[], name: string): string[] {
  return responsePairs(raw)
    .filter(([n]) => n === name)
    .map(([, value]) => value);
}

function recordExchange(
  log: TrafficLog,
  text: string,
  response: string[],
  feed: (bodies: Bodies) => void = (bodies) => bodies?.response.add(Buffer.from('hello')),
) {
  const head = parseRequestHead(text, { maxHeaderBytes: 8192 });
  if ('status' in head) throw new Error(head.reason);
  const { done, bodies } = trafficExchangeTap(log).begin({
    host: 'a.test',
    tunnel,
    scheme: 'http',
    head,
    clientIp: '127.0.0.1',
  });
  feed(bodies);
  done(200, response);
  return { record: log.list({ limit: 1 })[0]!, head, bodies };
}

describe('trafficExchangeTap', () => {
  it('keeps no credential in clear, with body capture off and on', () => {
    const log = new TrafficLog({ redactHeaders: ['x-api-key'] });
    for (const capture of [false, true]) {
      log.setCapture('a.test', capture);
      const { record } = recordExchange(log, CREDENTIALS_HEAD, CREDENTIALS_RESPONSE);
      expect(record.status).toBe(200);
      expect(record.credentialsShown).toBe(false);
      expect(JSON.stringify(record)).not.toContain('secret');
      const headers = new Map<string, string>();
      for (let i = 0; i < record.requestHeaders.length; i += 2)
        headers.set(record.requestHeaders[i]!.toLowerCase(), record.requestHeaders[i + 1]!);
      expect(headers.get('authorization')).toBe('Bearer [redacted, 6 chars]');
      expect(headers.get('cookie')).toBe('sid=[redacted, 6 chars]');
      expect(headers.get('proxy-authorization')).toBe('Basic [redacted, 6 chars]');
      expect(headers.get('x-api-key')).toBe('[redacted, 6 chars]');
      expect(valuesOf(record.responseHeaders, 'set-cookie')).toEqual([
        'sid=[redacted, 6 chars]; Path=/; HttpOnly',
        'other=[redacted, 6 chars]',
      ]);
      expect(record.responseBody === undefined).toBe(!capture);
    }
  });

  it('keeps them as sent once the host shows credentials', () => {
    const log = new TrafficLog();
    log.setCredentialsShown('a.test', true);
    const { record } = recordExchange(log, CREDENTIALS_HEAD, CREDENTIALS_RESPONSE);
    expect(record.credentialsShown).toBe(true);
    expect(record.requestHeaders).toContain('Bearer secret');
    expect(valuesOf(record.responseHeaders, 'set-cookie')).toContain('other=secret');
  });

  it('redacts what the relay records, and leaves the parsed head alone', () => {
    const { record, head, bodies } = recordExchange(
      new TrafficLog(),
      'GET /x HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer secret\r\nCookie: sid=secret\r\n\r\n',
      ['Set-Cookie', 'sid=secret', 'Content-Type', 'text/plain'],
    );
    expect(JSON.stringify(record)).not.toContain('secret');
    expect(record.requestHeaders).toContain('Bearer [redacted, 6 chars]');
    expect(record.responseHeaders).toEqual([
      ...['Set-Cookie', 'sid=[redacted, 6 chars]'],
      ...['Content-Type', 'text/plain'],
    ]);
    // The parsed head the relay writes to the agent is not touched.
    expect(head.raw).toContain('Bearer secret');
    // Capture off for the host: the relay is given nowhere to copy bodies to.
    expect(bodies).toBeUndefined();
  });

  it('keeps the bodies the relay hands it for a host that captures them', () => {
    const log = new TrafficLog();
    log.setCapture('a.test', true);
    const { record } = recordExchange(log, 'POST /x HTTP/1.1\r\nHost: a.test\r\n\r\n', [], (b) => {
      b!.request.add(Buffer.from('in'));
      b!.response.add(Buffer.from('ou'));
      b!.response.add(Buffer.from('t'));
    });
    expect(record.requestBody?.bytes.toString()).toBe('in');
    expect(record.responseBody).toMatchObject({ size: 3, truncated: false });
    expect(record.responseBody?.bytes.toString()).toBe('out');
  });
});
