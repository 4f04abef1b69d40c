import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { forwardedHeaders, rewrittenHost, routingHost, upstreamHost } from './http-forwarding.js';
import { clientAddr, clientIp } from '../../registry/connect-tunnel.js';
import {
  incomingTrace,
  parseTraceparent,
  startSpan,
  traceparentOf,
} from '../../metrics/trace-context.js';
import { parseListenAddress } from '../../../core/host-port.js';

/**
 * The headers sent upstream for `req`, as the relay reads them off a parsed head: forwardedHeaders
 * given the request's Host, Connection and framing.
 */
function forwardRequestHeaders(
  req: IncomingMessage,
  options: Parameters<typeof forwardedHeaders>[2],
): string[] {
  const connection = req.headers.connection;
  return forwardedHeaders(
    req.rawHeaders,
    {
      host: req.headers.host,
      connection: Array.isArray(connection) ? connection.join(', ') : connection,
      chunked: req.headers['transfer-encoding'] !== undefined,
    },
    options,
  );
}

/** An IncomingMessage as far as the forwarding functions look at it. */
function message(rawHeaders: string[], extra: Partial<IncomingMessage> = {}): IncomingMessage {
  const headers: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    headers[name] = headers[name] ? `${headers[name]}, ${rawHeaders[i + 1]}` : rawHeaders[i + 1]!;
  }
  return { rawHeaders, headers, ...extra } as unknown as IncomingMessage;
}

describe('routingHost', () => {
  it.each([
    ['App.Example.COM', 'app.example.com'],
    ['app.example.com:8080', 'app.example.com'],
    ['app.example.com.', 'app.example.com'],
    ['App.Example.com.:8080', 'app.example.com'],
    ['[::1]:8080', '[::1]'],
    ['', undefined],
    [undefined, undefined],
    ['[::1', undefined],
  ])('%s -> %s', (host, expected) => {
    expect(routingHost(host)).toBe(expected);
  });
});

describe('forwardedHeaders', () => {
  it('keeps end-to-end headers in order and case, replaces X-Forwarded-Proto/Host, appends X-Forwarded-For', () => {
    const req = message([
      'Host',
      'app.example.com',
      'X-Forwarded-For',
      '198.51.100.1',
      'x-forwarded-for',
      '198.51.100.2',
      'X-Forwarded-Proto',
      'https',
      'X-Forwarded-Host',
      'evil.example.com',
      'Cookie',
      'a=1',
      'Connection',
      'keep-alive, X-Private',
      'X-Private',
      'secret',
      'Keep-Alive',
      'timeout=5',
      'Proxy-Connection',
      'keep-alive',
      'TE',
      'trailers',
      'Upgrade',
      'h2c',
    ]);
    expect(forwardRequestHeaders(req, { proto: 'http', clientIp: '203.0.113.9' })).toEqual([
      'Host',
      'app.example.com',
      'Cookie',
      'a=1',
      'TE',
      'trailers',
      'X-Forwarded-For',
      '198.51.100.1, 198.51.100.2, 203.0.113.9',
      'X-Forwarded-Host',
      'app.example.com',
      'X-Forwarded-Proto',
      'http',
      'Connection',
      'keep-alive',
    ]);
  });

  it('re-chunks a chunked body and keeps Upgrade for upgrades', () => {
    const chunked = message(['Host', 'a.example.com', 'Transfer-Encoding', 'chunked']);
    expect(forwardRequestHeaders(chunked, { proto: 'https', clientIp: '::1' }).slice(-4)).toEqual([
      'Connection',
      'keep-alive',
      'Transfer-Encoding',
      'chunked',
    ]);
    const upgrade = message([
      'Host',
      'a.example.com',
      'Connection',
      'Upgrade',
      'Upgrade',
      'websocket',
    ]);
    const headers = forwardRequestHeaders(upgrade, {
      proto: 'http',
      clientIp: '::1',
      upgrade: true,
    });
    expect(headers).toContain('websocket');
    expect(headers.slice(-2)).toEqual(['Connection', 'Upgrade']);
  });
});

describe('traceparent', () => {
  const framing = { host: 'app.test', connection: undefined, chunked: false };
  const options = { proto: 'https' as const, clientIp: '203.0.113.7' };
  const client = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

  it('names the edge span as the parent, in the trace the client sent, keeping its tracestate', () => {
    const raw = ['Host', 'app.test', 'traceparent', client, 'tracestate', 'vendor=1'];
    const span = startSpan(raw);
    expect(span).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      flags: '01',
    });
    const out = forwardedHeaders(raw, framing, { ...options, span });
    const pairs = Object.fromEntries(
      Array.from({ length: out.length / 2 }, (_, i) => [out[2 * i]!.toLowerCase(), out[2 * i + 1]]),
    );
    expect(out.filter((h) => h.toLowerCase() === 'traceparent')).toHaveLength(1);
    expect(pairs.traceparent).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${span.spanId}-01`);
    expect(span.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(pairs.tracestate).toBe('vendor=1');
  });

  it('starts a trace for a request without a valid traceparent, and drops the old tracestate', () => {
    for (const bad of [
      [],
      ['traceparent', 'garbage'],
      ['traceparent', client, 'traceparent', client],
    ]) {
      const raw = ['Host', 'app.test', ...bad, 'tracestate', 'vendor=1'];
      const span = startSpan(raw);
      expect(span.parentSpanId).toBeUndefined();
      expect(span.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(span.traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      const out = forwardedHeaders(raw, framing, { ...options, span });
      expect(out).toContain(traceparentOf(span));
      expect(out.filter((h) => /^trace/i.test(h))).toEqual(['traceparent']);
    }
  });

  it('leaves the headers alone without a span (traces not exported)', () => {
    const raw = ['Host', 'app.test', 'traceparent', 'garbage', 'tracestate', 'vendor=1'];
    const out = forwardedHeaders(raw, framing, options);
    expect(out.slice(0, 6)).toEqual(raw);
  });

  it('reads traceparent as W3C Trace Context says', () => {
    expect(parseTraceparent(client.toUpperCase())).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentId: '00f067aa0ba902b7',
      flags: '01',
    });
    // A later version is read for what version 00 defines, extra fields and all.
    expect(parseTraceparent(`cc${client.slice(2)}-what-comes-next`)?.traceId).toBe(
      '4bf92f3577b34da6a3ce929d0e0e4736',
    );
    for (const bad of [
      `ff${client.slice(2)}`,
      `${client}-extra`,
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
    ]) {
      expect(parseTraceparent(bad), bad).toBeUndefined();
    }
    expect(incomingTrace(['TraceParent', client])?.parentId).toBe('00f067aa0ba902b7');
  });
});

describe('HostHeaderRewrite', () => {
  it.each([
    ['localhost:3000', 'localhost:3000'],
    ['http://localhost:3000', 'localhost:3000'],
    ['http://LocalHost:3000/', 'localhost:3000'],
    ['http://localhost:80', 'localhost'],
    ['https://api.example.com:443/base', 'api.example.com'],
    ['https://api.example.com:8443', 'api.example.com:8443'],
    ['http://[::1]:8080', '[::1]:8080'],
    ['[::1]:8080', '[::1]:8080'],
    ['127.0.0.1:80', '127.0.0.1:80'],
    ['  web:8080 ', 'web:8080'],
    ['', undefined],
    ['http.Server', undefined],
    ['request handler', undefined],
    ['app://laptop/server.js?pid=42', undefined],
    ['tcp://localhost:22', undefined],
    ['http://', undefined],
    ['localhost:99999', undefined],
    ['localhost:0', undefined],
    ['localhost', undefined],
  ])('ForwardsTo %j -> Host %j', (forwardsTo, expected) => {
    expect(upstreamHost(forwardsTo)).toBe(expected);
  });

  it('rewrites only with the option on', () => {
    expect(rewrittenHost({ hostHeaderRewrite: true, forwardsTo: 'localhost:3000' })).toBe(
      'localhost:3000',
    );
    expect(rewrittenHost({ forwardsTo: 'localhost:3000' })).toBeUndefined();
    expect(rewrittenHost({ hostHeaderRewrite: true, forwardsTo: 'http.Server' })).toBeUndefined();
  });

  it("replaces the client's Host in place, keeps it in X-Forwarded-Host, adds one when missing", () => {
    const framing = { host: 'app.example.com', connection: undefined, chunked: false };
    const options = { proto: 'https' as const, clientIp: '203.0.113.9', host: 'localhost:3000' };
    expect(
      forwardedHeaders(['Accept', '*/*', 'host', 'app.example.com', 'X-A', '1'], framing, options),
    ).toEqual([
      'Accept',
      '*/*',
      'host',
      'localhost:3000',
      'X-A',
      '1',
      'X-Forwarded-For',
      '203.0.113.9',
      'X-Forwarded-Host',
      'app.example.com',
      'X-Forwarded-Proto',
      'https',
      'Connection',
      'keep-alive',
    ]);
    const none = forwardedHeaders(['Accept', '*/*'], { ...framing, host: undefined }, options);
    expect(none.slice(0, 4)).toEqual(['Host', 'localhost:3000', 'Accept', '*/*']);
  });
});

describe('addresses', () => {
  it('formats client addresses the way the ProxyHeader carries them', () => {
    expect(clientIp({ remoteAddress: '::ffff:203.0.113.7' })).toBe('203.0.113.7');
    expect(clientAddr({ remoteAddress: '203.0.113.7', remotePort: 4567 })).toBe('203.0.113.7:4567');
    expect(clientAddr({ remoteAddress: '2001:db8::1', remotePort: 4567 })).toBe(
      '[2001:db8::1]:4567',
    );
  });

  it('parses listen addresses, port 0 included', () => {
    expect(parseListenAddress('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListenAddress('[::1]:8443')).toEqual({ host: '::1', port: 8443 });
    expect(parseListenAddress(':8080')).toEqual({ host: '', port: 8080 });
    expect(() => parseListenAddress('localhost')).toThrow(/host:port/);
    expect(() => parseListenAddress('localhost:70000')).toThrow(/host:port/);
  });
});
