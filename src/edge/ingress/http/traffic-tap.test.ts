import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrafficLog } from '../../metrics/traffic-log.js';
import type { OnlineTunnel } from '../../registry/tunnel-registry.js';
import { parseRequestHead } from './request-head.js';
import { trafficExchangeTap, trafficTap } from './traffic-tap.js';

// The tap reads only the tunnel's id.
const tunnel = { id: 'tn_tap' } as OnlineTunnel;

const CREDENTIALS = {
  Authorization: 'Bearer secret',
  Cookie: 'sid=secret',
  'Proxy-Authorization': 'Basic secret',
  'X-Api-Key': 'secret',
};

/**
 * The full HTTP path's tap on a real Node server: the visitor's credentials (both ways) are
 * redacted in what the log keeps, unless the host shows them.
 */
describe('trafficTap', () => {
  const log = new TrafficLog({ redactHeaders: ['x-api-key'] });
  let server: Server;
  let base: string;
  /** Resolves once the server's last response closed, after the tap's own close listener. */
  let closed: Promise<void> = Promise.resolve();
  beforeAll(async () => {
    server = createServer((req, res) => {
      trafficTap(log, req, res, tunnel);
      closed = once(res, 'close').then(() => undefined);
      req.resume();
      if (req.url === '/raw') {
        // As the ingress writes an agent's answer: a raw list, no setHeader before.
        res.writeHead(200, 'OK', ['Set-Cookie', 'sid=secret', 'Set-Cookie', 'b=2', 'X-Other', 'x']);
        res.end('hello');
        return;
      }
      res.setHeader('set-cookie', ['sid=secret; Path=/; HttpOnly', 'other=secret']);
      res.setHeader('x-api-key', 'secret');
      res.end('hello');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server.close());

  /** Send a request with credentials and wait until its record is answered. */
  const send = async (path = '/login') => {
    const res = await fetch(`${base}${path}`, { headers: CREDENTIALS });
    await res.text();
    await closed;
    return log.list({ limit: 1 })[0]!;
  };

  it('keeps no credential in clear, with body capture off and on', async () => {
    for (const capture of [false, true]) {
      // fetch sets Host from the URL; every request here is the same host.
      log.setCapture('127.0.0.1', capture);
      const record = await send();
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
      expect(record.responseHeaders['set-cookie']).toEqual([
        'sid=[redacted, 6 chars]; Path=/; HttpOnly',
        'other=[redacted, 6 chars]',
      ]);
      expect(record.responseBody === undefined).toBe(!capture);
    }
  });

  it('records and redacts headers written as a raw list by writeHead', async () => {
    const record = await send('/raw');
    expect(record.responseHeaders).toMatchObject({
      'set-cookie': ['sid=[redacted, 6 chars]', 'b=[redacted, 1 char]'],
      'x-other': 'x',
    });
  });

  it('keeps them as sent once the host shows credentials', async () => {
    log.setCredentialsShown('127.0.0.1', true);
    try {
      const record = await send();
      expect(record.credentialsShown).toBe(true);
      expect(record.requestHeaders).toContain('Bearer secret');
      expect(record.responseHeaders['set-cookie']).toContain('other=secret');
    } finally {
      log.setCredentialsShown('127.0.0.1', false);
    }
  });
});

describe('trafficExchangeTap', () => {
  it('redacts what the lean relay records', () => {
    const log = new TrafficLog();
    const head = parseRequestHead(
      'GET /x HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer secret\r\nCookie: sid=secret\r\n\r\n',
      { maxHeaderBytes: 8192 },
    );
    if ('status' in head) throw new Error(head.reason);
    const { done, bodies } = trafficExchangeTap(log).begin({
      host: 'a.test',
      tunnel,
      scheme: 'http',
      head,
      clientIp: '127.0.0.1',
    });
    done(200, ['Set-Cookie', 'sid=secret', 'Content-Type', 'text/plain']);
    const record = log.list({})[0]!;
    expect(JSON.stringify(record)).not.toContain('secret');
    expect(record.requestHeaders).toContain('Bearer [redacted, 6 chars]');
    expect(record.responseHeaders).toEqual({
      'set-cookie': 'sid=[redacted, 6 chars]',
      'content-type': 'text/plain',
    });
    // The parsed head the relay writes to the agent is not touched.
    expect(head.raw).toContain('Bearer secret');
    // Capture off for the host: the relay is given nowhere to copy bodies to.
    expect(bodies).toBeUndefined();
  });

  it('keeps the bodies the relay hands it for a host that captures them', () => {
    const log = new TrafficLog();
    log.setCapture('a.test', true);
    const head = parseRequestHead('POST /x HTTP/1.1\r\nHost: a.test\r\n\r\n', {
      maxHeaderBytes: 8192,
    });
    if ('status' in head) throw new Error(head.reason);
    const { done, bodies } = trafficExchangeTap(log).begin({
      host: 'a.test',
      tunnel,
      scheme: 'http',
      head,
      clientIp: '127.0.0.1',
    });
    bodies!.request.add(Buffer.from('in'));
    bodies!.response.add(Buffer.from('ou'));
    bodies!.response.add(Buffer.from('t'));
    done(200, []);
    const record = log.list({})[0]!;
    expect(record.requestBody?.bytes.toString()).toBe('in');
    expect(record.responseBody).toMatchObject({ size: 3, truncated: false });
    expect(record.responseBody?.bytes.toString()).toBe('out');
  });
});
