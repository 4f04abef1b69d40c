import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeOtlp } from '../../../test/support/otlp-receiver.js';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import {
  configureEgress,
  parseEgressAllow,
  type EgressAllowEntry,
} from '../../core/egress-guard.js';
import type { DestinationDelivery } from '../../store/event-destinations.js';
import type { EventSubscription } from '../../store/event-subscriptions.js';
import type { TrafficRecord } from '../metrics/traffic-log.js';
import type { OnlineTunnel } from '../registry/tunnel-registry.js';
import { EventRouter } from './event-router.js';
import { SIGNATURE_HEADER } from './sinks.js';
import type { TrafficEvent } from './traffic-events.js';

/**
 * The router with real sockets: a webhook receiver gets each event once, signed; a file gets JSON
 * lines; subscriptions decide which type goes where; a failed delivery is retried; a receiver the
 * egress guard refuses gets nothing and the loss is counted.
 */

const SECRET = 'whsec_test';

interface Delivery {
  url: string | undefined;
  signature: string | undefined;
  apiKey: string | undefined;
  contentType: string | undefined;
  body: string;
  raw: Buffer;
}

function record(path: string, n: number): TrafficRecord {
  return {
    ...trafficRequest('app.test', { path, status: 200, durationMs: 3 }),
    id: `tr_${n}`,
    seq: n,
    credentialsShown: false,
  };
}

const subscription = (types: string[], ids: string[]): EventSubscription => ({
  id: `esb_${types.join()}_${ids.join()}`,
  description: '',
  metadata: '',
  created_at: '',
  sources: types.map((type) => ({ type })) as EventSubscription['sources'],
  destination_ids: ids,
});

describe('EventRouter', () => {
  let receiver: Server;
  let hookUrl: string;
  const deliveries: Delivery[] = [];
  /** Answers to give before 200s, e.g. [503] for a failed first try. */
  const failFirst: number[] = [];
  let dir: string;

  beforeAll(async () => {
    receiver = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        const status = failFirst.shift() ?? 200;
        if (status === 200) {
          const raw = Buffer.concat(chunks);
          deliveries.push({
            url: req.url,
            signature: req.headers[SIGNATURE_HEADER] as string | undefined,
            apiKey: req.headers['x-api-key'] as string | undefined,
            contentType: req.headers['content-type'],
            body: raw.toString('utf8'),
            raw,
          });
        }
        res.writeHead(status).end();
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    dir = await mkdtemp(join(tmpdir(), 'burrow-events-'));
    configureEgress({ allow: [parseEgressAllow('127.0.0.1') as EgressAllowEntry] });
  });
  afterAll(async () => {
    configureEgress({ allow: [] });
    receiver.close();
    await rm(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    deliveries.length = 0;
  });

  /** Warnings the routers logged, as pino wrote them. */
  const warnings: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'warn' },
    { write: (line: string) => warnings.push(JSON.parse(line) as Record<string, unknown>) },
  );

  function router(destinations: DestinationDelivery[], subs: EventSubscription[]) {
    return new EventRouter({
      source: { deliveries: async () => destinations, subscriptions: async () => subs },
      logger,
      env: {},
      queue: { flushMs: 10, backoffMs: 10 },
    });
  }

  const webhook: DestinationDelivery = {
    id: 'ed_hook',
    kind: 'webhook',
    target: { webhook: { url: '' } },
    signingSecret: SECRET,
  };

  it('sends each request once to a webhook, signed, however many subscriptions route it', async () => {
    const hook = { ...webhook, target: { webhook: { url: hookUrl } } };
    const events = router(
      [hook],
      [
        subscription(['http_request_complete.v0'], ['ed_hook']),
        subscription(['http_request_complete.v0', 'tcp_connection_closed.v0'], ['ed_hook']),
      ],
    );
    await events.reload();
    failFirst.push(503); // the first try fails: the batch is sent again, and only then counted
    for (const [i, path] of ['/a', '/b', '/c'].entries()) events.httpRequest(record(path, i));
    await events.flush();
    const received = deliveries.flatMap((d) => {
      const expected = `sha256=${createHmac('sha256', SECRET).update(d.body).digest('hex')}`;
      expect(d.signature).toBe(expected);
      return JSON.parse(d.body) as TrafficEvent[];
    });
    expect(received.map((e) => e.object['http.request.url.path'])).toEqual(['/a', '/b', '/c']);
    expect(new Set(received.map((e) => e.event_id)).size).toBe(3);
    expect(received[0]).toMatchObject({
      event_type: 'http_request_complete.v0',
      object: {
        'http.request.method': 'GET',
        'http.request.url.host': 'app.test',
        'http.response.status_code': 200,
        'conn.client_ip': '198.51.100.4',
      },
    });
    await events.close();
  });

  it('writes tcp_connection_closed.v0 as JSON lines to a file subscribed to it, and nothing else', async () => {
    const path = join(dir, 'events.jsonl');
    const events = router(
      [{ id: 'ed_file', kind: 'file', target: { file: { path } } }],
      [subscription(['tcp_connection_closed.v0'], ['ed_file'])],
    );
    await events.reload();
    events.httpRequest(record('/not-for-the-file', 9));
    // A real connection: the event reads the socket's own addresses and byte counts.
    const server = createTcpServer((s) => s.resume().end('pong!'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    const accepted = await new Promise<Socket>((resolve) => server.once('connection', resolve));
    const { remoteAddress, remotePort, localAddress, localPort } = accepted;
    const addresses = { remoteAddress, remotePort, localAddress, localPort };
    client.resume().write('ping');
    await once(client, 'end');
    client.end();
    await once(accepted, 'close');
    const tunnel = { id: 'tn_tcp', url: 'tcp://edge.test:20001' } as OnlineTunnel;
    events.tcpClosed({
      socket: accepted,
      addresses,
      tunnel,
      proto: 'tcp',
      startedAt: Date.now() - 5,
    });
    server.close();
    await events.flush();
    const lines = (await readFile(path, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    const event = JSON.parse(lines[0]!) as TrafficEvent;
    expect(event.event_type).toBe('tcp_connection_closed.v0');
    expect(event.object).toMatchObject({
      'conn.client_ip': '127.0.0.1',
      'conn.client_port': remotePort,
      'conn.server_port': localPort,
      'conn.bytes_in': 4,
      'conn.bytes_out': 5,
      'endpoint.id': 'tn_tcp',
      'endpoint.url': 'tcp://edge.test:20001',
      'endpoint.proto': 'tcp',
    });
    expect(event.object['conn.duration_ms']).toBeGreaterThanOrEqual(5);
    await events.close();
  });

  it('sends a connection to an OpenTelemetry destination as a log record with its headers', async () => {
    const events = router(
      [
        {
          id: 'ed_otel',
          kind: 'opentelemetry',
          target: {
            opentelemetry: {
              url: hookUrl.replace('/hook', '/v1/logs'),
              headers: { 'x-api-key': 'k1' },
              protocol: 'http/json',
            },
          },
        },
      ],
      [subscription(['tcp_connection_closed.v0'], ['ed_otel'])],
    );
    await events.reload();
    const socket = { bytesRead: 7, bytesWritten: 9 } as Socket;
    const addresses = {
      remoteAddress: '::ffff:203.0.113.9',
      remotePort: 40_000,
      localAddress: '::ffff:192.0.2.1',
      localPort: 20_001,
    };
    const tunnel = { id: 'tn_tls', url: 'tls://db.edge.test:443' } as OnlineTunnel;
    events.tcpClosed({ socket, addresses, tunnel, proto: 'tls', startedAt: Date.now() - 20 });
    await events.flush();
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({
      url: '/v1/logs',
      apiKey: 'k1',
      signature: undefined,
      contentType: 'application/json',
    });
    const body = JSON.parse(deliveries[0]!.body) as {
      resourceLogs: Array<{ scopeLogs: Array<{ logRecords: Array<{ attributes: unknown[] }> }> }>;
    };
    const attributes = body.resourceLogs[0]!.scopeLogs[0]!.logRecords[0]!.attributes;
    expect(attributes).toEqual(
      expect.arrayContaining([
        { key: 'event.name', value: { stringValue: 'tcp_connection_closed.v0' } },
        { key: 'conn.client_ip', value: { stringValue: '203.0.113.9' } },
        { key: 'conn.server_port', value: { intValue: '20001' } },
        { key: 'conn.bytes_in', value: { intValue: '7' } },
        { key: 'conn.bytes_out', value: { intValue: '9' } },
        { key: 'endpoint.proto', value: { stringValue: 'tls' } },
      ]),
    );
    await events.close();
  });

  it('sends a request to an OpenTelemetry destination with a traces URL as a protobuf span and record, and only then traces', async () => {
    const otel: DestinationDelivery = {
      id: 'ed_traces',
      kind: 'opentelemetry',
      target: {
        opentelemetry: {
          url: hookUrl.replace('/hook', '/v1/logs'),
          traces_url: hookUrl.replace('/hook', '/v1/traces'),
        },
      },
    };
    const logsOnly = router([{ ...otel, target: { opentelemetry: { url: hookUrl } } }], []);
    await logsOnly.reload();
    expect(logsOnly.tracing).toBe(false);
    // Routed only connections: requests are not traced for it.
    const events = router([otel], [subscription(['tcp_connection_closed.v0'], ['ed_traces'])]);
    await events.reload();
    expect(events.tracing).toBe(false);
    const traced = router([otel], [subscription(['http_request_complete.v0'], ['ed_traces'])]);
    await traced.reload();
    expect(traced.tracing).toBe(true);
    const trace = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '53995c3f42cd8ad8',
      parentSpanId: undefined,
      flags: '01',
    };
    traced.httpRequest({ ...record('/traced', 7), trace });
    await traced.flush();
    const byUrl = new Map(deliveries.map((d) => [d.url, d]));
    expect(byUrl.get('/v1/traces')?.contentType).toBe('application/x-protobuf');
    const spans = decodeOtlp('traces', byUrl.get('/v1/traces')!.raw) as {
      resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>;
    };
    expect(spans.resourceSpans[0]!.scopeSpans[0]!.spans[0]).toMatchObject({
      traceId: trace.traceId,
      spanId: trace.spanId,
      name: 'GET app.test',
      kind: 2,
    });
    const logs = decodeOtlp('logs', byUrl.get('/v1/logs')!.raw) as {
      resourceLogs: Array<{ scopeLogs: Array<{ logRecords: Array<Record<string, unknown>> }> }>;
    };
    expect(logs.resourceLogs[0]!.scopeLogs[0]!.logRecords[0]).toMatchObject({
      traceId: trace.traceId,
      spanId: trace.spanId,
    });
    await Promise.all([logsOnly.close(), events.close(), traced.close()]);
  });

  it('sends nothing for types no subscription names, and to nowhere the egress guard refuses', async () => {
    const hook = { ...webhook, target: { webhook: { url: hookUrl } } };
    const events = router([hook], [subscription(['tcp_connection_closed.v0'], ['ed_hook'])]);
    await events.reload();
    events.httpRequest(record('/filtered', 1));
    await events.flush();
    expect(deliveries).toEqual([]);

    configureEgress({ allow: [] });
    try {
      const guarded = router([hook], [subscription(['http_request_complete.v0'], ['ed_hook'])]);
      await guarded.reload();
      guarded.httpRequest(record('/refused', 2));
      await guarded.flush();
      expect(deliveries).toEqual([]);
      // Refused at every try, then given up and counted (and logged once).
      expect(warnings.at(-1)).toMatchObject({
        msg: 'traffic events lost',
        destination: 'ed_hook',
        dropped: 1,
        failed: 1,
      });
      await guarded.close();
    } finally {
      configureEgress({ allow: [parseEgressAllow('127.0.0.1') as EgressAllowEntry] });
    }
    await events.close();
  });
});
