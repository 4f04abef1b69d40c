import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Issue 33, traffic events out: a real `burrow server` started with the standard
 * `OTEL_EXPORTER_OTLP_ENDPOINT` sends each request a visitor made through the @ngrok/ngrok agent
 * to a local OTLP/HTTP receiver as a log record `http_request_complete.v0`, each once, with its
 * method, host, path and status, and without the visitor's credentials; a request that came with a
 * W3C traceparent reaches the service with it, and its record carries the same trace id.
 */

interface LogRecord {
  traceId?: string;
  attributes: Array<{ key: string; value: { stringValue?: string; intValue?: string } }>;
}

describe('traffic events to OpenTelemetry', () => {
  let collector: Server;
  const received: LogRecord[] = [];
  const seenTraceparents: string[] = [];
  let edge: EdgeServer;
  let service: LocalServer;
  let session: ngrok.Session;
  let url: string;
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );
  const attr = (r: LogRecord, key: string) => {
    const v = r.attributes.find((a) => a.key === key)?.value;
    return v?.stringValue ?? v?.intValue;
  };

  beforeAll(async () => {
    collector = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8').on('data', (d: string) => (text += d));
      req.on('end', () => {
        if (req.url === '/v1/logs' && req.headers['content-type'] === 'application/json') {
          const body = JSON.parse(text) as {
            resourceLogs: Array<{ scopeLogs: Array<{ logRecords: LogRecord[] }> }>;
          };
          for (const rl of body.resourceLogs)
            for (const sl of rl.scopeLogs) received.push(...sl.logRecords);
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    collector.listen(0, '127.0.0.1');
    await once(collector, 'listening');
    // The server process inherits the test's environment (but BURROW_*): set the standard variable.
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
    try {
      edge = await startEdgeServer('sqlite');
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    }
    service = await startHttpUpstream((req, res) => {
      seenTraceparents.push(String(req.headers.traceparent ?? ''));
      res.writeHead(201).end('made');
    });
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const listener = await session
      .httpEndpoint()
      .listenAndForward(`http://127.0.0.1:${service.port}`);
    url = listener.url()!;
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    collector?.close();
  });

  it('sends each request once, as http_request_complete.v0, without credentials', async () => {
    const paths = ['/one', '/two', '/three'];
    for (const path of paths) {
      const res = await curlUrl(url, path, ['-H', 'Authorization: Bearer visitor-secret']);
      expect(res.status).toBe(201);
    }
    // Batches leave within a second of their first event; wait for all three to arrive.
    for (let i = 0; i < 200 && received.length < paths.length; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const mine = received.filter((r) => paths.includes(attr(r, 'url.path') ?? ''));
    expect(mine.map((r) => attr(r, 'url.path')).sort()).toEqual([...paths].sort());
    for (const r of mine) {
      expect(attr(r, 'event.name')).toBe('http_request_complete.v0');
      expect(attr(r, 'http.request.method')).toBe('GET');
      expect(attr(r, 'http.response.status_code')).toBe('201');
      expect(attr(r, 'server.address')).toBe(new URL(url).hostname);
    }
    expect(JSON.stringify(received)).not.toContain('visitor-secret');
  });

  it("puts the edge's record in the trace the client and the service share", async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const res = await curlUrl(url, '/traced', ['-H', `traceparent: ${traceparent}`]);
    expect(res.status).toBe(201);
    expect(seenTraceparents.at(-1)).toBe(traceparent);
    const traced = () => received.find((r) => attr(r, 'url.path') === '/traced');
    for (let i = 0; i < 200 && !traced(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(traced()?.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });
});
