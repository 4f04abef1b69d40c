import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { connectNgrok } from './support/ngrok-agents.js';
import {
  otlpAttr,
  startOtlpReceiver,
  type DecodedLogRecord,
  type DecodedSpan,
  type OtlpReceiver,
} from './support/otlp-receiver.js';

/**
 * Issue 33, traffic events to OpenTelemetry: a real `burrow server` started with the standard
 * `OTEL_EXPORTER_OTLP_*` variables sends each request a visitor made through the @ngrok/ngrok
 * agent to a test OTLP/HTTP collector, which decodes the protobuf with the OpenTelemetry packages'
 * own definitions (test/support/otlp-receiver.ts): each request once as a log record
 * `http_request_complete.v0` and once as the edge's SERVER span, in one trace with the service,
 * which gets a `traceparent` naming the edge's span. Without a policy, with a policy that adds a
 * header, and over HTTP/2 alike. With traces switched off, requests go on unchanged.
 */

/** What the service saw of each request: its path and traceparent. */
type Seen = Map<string, string>;

async function startTracedService(seen: Seen): Promise<LocalServer> {
  return startHttpUpstream((req, res) => {
    seen.set(req.url ?? '', String(req.headers.traceparent ?? ''));
    res.writeHead(201).end('made');
  });
}

/** Batches leave within a second of their first item; a wait for them gives up after 10 s. */
const BATCH_WAIT_MS = 10_000;

/** Start a server with `env` set for its process only (it inherits the test's environment). */
async function startWithEnv(env: Record<string, string>): Promise<EdgeServer> {
  Object.assign(process.env, env);
  try {
    return await startEdgeServer('sqlite');
  } finally {
    for (const name of Object.keys(env)) delete process.env[name];
  }
}

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_PARENT = '00f067aa0ba902b7';
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_PARENT}-01`;

describe('traffic events to OpenTelemetry, logs and traces in protobuf', () => {
  let otlp: OtlpReceiver;
  const seen: Seen = new Map();
  let edge: EdgeServer;
  let service: LocalServer;
  let session: ngrok.Session;
  let leanUrl: string;
  let policyUrl: string;
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    // Only the base endpoint: the protocol is the specification's default, http/protobuf.
    edge = await startWithEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
    service = await startTracedService(seen);
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const lean = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${service.port}`);
    leanUrl = lean.url()!;
    // A request policy that changes the request.
    const policy = {
      on_http_request: [
        { actions: [{ type: 'add-headers', config: { headers: { 'x-a': '1' } } }] },
      ],
    };
    const full = await session
      .httpEndpoint()
      .trafficPolicy(JSON.stringify(policy))
      .listenAndForward(`http://127.0.0.1:${service.port}`);
    policyUrl = full.url()!;
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    await otlp?.close();
  });

  it('sends each request once as a record and once as a span, in the trace the service is told of', async () => {
    const auth = ['-H', 'Authorization: Bearer visitor-secret'];
    const runs: Array<[string, string, string[]]> = [
      [leanUrl, '/one', auth],
      [leanUrl, '/two', auth],
      [leanUrl, '/three', ['-H', `traceparent: ${CLIENT_TRACEPARENT}`, '-H', 'tracestate: a=1']],
      [policyUrl, '/four', auth],
      [policyUrl, '/five', ['-H', `traceparent: ${CLIENT_TRACEPARENT}`]],
      [leanUrl.replace('http:', 'https:'), '/six', ['--http2', ...auth]],
    ];
    for (const [url, path, extra] of runs) {
      const res = await curlUrl(url, path, extra);
      expect(res.status, path).toBe(201);
    }
    const paths = runs.map(([, path]) => path);
    const mine = <T extends DecodedLogRecord | DecodedSpan>(items: T[]) =>
      items.filter((i) => paths.includes(otlpAttr(i, 'url.path') ?? ''));
    await until(
      () => mine(otlp.logs).length >= paths.length && mine(otlp.spans).length >= paths.length,
      BATCH_WAIT_MS,
    );

    // Every body was protobuf, to the standard paths.
    expect(otlp.requests.length).toBeGreaterThan(0);
    for (const r of otlp.requests) {
      expect(['/v1/logs', '/v1/traces']).toContain(r.path);
      expect(r.contentType).toBe('application/x-protobuf');
    }
    expect(otlp.resources.traces).toContainEqual({
      key: 'service.name',
      value: { stringValue: 'burrow' },
    });

    const logs = mine(otlp.logs);
    const spans = mine(otlp.spans);
    // Each request of the run exactly once in each signal.
    expect(logs.map((r) => otlpAttr(r, 'url.path')).sort()).toEqual([...paths].sort());
    expect(spans.map((s) => otlpAttr(s, 'url.path')).sort()).toEqual([...paths].sort());

    for (const path of paths) {
      const span = spans.find((s) => otlpAttr(s, 'url.path') === path)!;
      const log = logs.find((r) => otlpAttr(r, 'url.path') === path)!;
      expect(span, path).toMatchObject({ kind: 2 });
      expect(span.name).toBe(`GET ${otlpAttr(span, 'server.address')}`);
      expect(otlpAttr(span, 'http.response.status_code')).toBe('201');
      expect(BigInt(span.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(span.startTimeUnixNano));
      expect(otlpAttr(log, 'event.name')).toBe('http_request_complete.v0');
      // The service saw the span's trace, with the edge's span as its parent.
      expect(seen.get(path), path).toBe(`00-${span.traceId}-${span.spanId}-01`);
      expect({ traceId: log.traceId, spanId: log.spanId }).toEqual({
        traceId: span.traceId,
        spanId: span.spanId,
      });
    }
    // A request that came in a trace stays in it: the client's span is the edge span's parent.
    for (const path of ['/three', '/five']) {
      const span = spans.find((s) => otlpAttr(s, 'url.path') === path)!;
      expect(span.traceId, path).toBe(CLIENT_TRACE);
      expect(span.parentSpanId, path).toBe(CLIENT_PARENT);
    }
    const fresh = spans.filter((s) => !['/three', '/five'].includes(otlpAttr(s, 'url.path')!));
    expect(new Set(fresh.map((s) => s.traceId)).size).toBe(fresh.length);
    for (const span of fresh) {
      expect(span.traceId).not.toBe(CLIENT_TRACE);
      expect(span.parentSpanId).toBeUndefined();
    }
    expect(JSON.stringify([otlp.logs, otlp.spans])).not.toContain('visitor-secret');
  });
});

describe('traffic events to OpenTelemetry, logs only in JSON', () => {
  let otlp: OtlpReceiver;
  const seen: Seen = new Map();
  let edge: EdgeServer;
  let service: LocalServer;
  let session: ngrok.Session;
  let url: string;
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    edge = await startWithEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_EXPORTER: 'none',
    });
    service = await startTracedService(seen);
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
    await otlp?.close();
  });

  it('passes requests on unchanged, and its records carry the trace the client sent', async () => {
    expect((await curlUrl(url, '/plain')).status).toBe(201);
    const traced = await curlUrl(url, '/traced', ['-H', `traceparent: ${CLIENT_TRACEPARENT}`]);
    expect(traced.status).toBe(201);
    expect(seen.get('/plain')).toBe('');
    expect(seen.get('/traced')).toBe(CLIENT_TRACEPARENT);
    const record = (path: string) => otlp.logs.find((r) => otlpAttr(r, 'url.path') === path);
    await until(
      () => record('/plain') !== undefined && record('/traced') !== undefined,
      BATCH_WAIT_MS,
    );
    expect(record('/traced')).toMatchObject({ traceId: CLIENT_TRACE, spanId: CLIENT_PARENT });
    expect(record('/plain')?.traceId).toBeUndefined();
    expect(otlp.spans).toEqual([]);
    expect(otlp.requests.map((r) => `${r.path} ${r.contentType}`)).toContain(
      '/v1/logs application/json',
    );
    expect(otlp.requests.every((r) => r.path === '/v1/logs')).toBe(true);
  });
});
