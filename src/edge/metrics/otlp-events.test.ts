import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import { decodeOtlp } from '../../../test/support/otlp-receiver.js';
import { otlpFromEnv, otlpResourceFromEnv } from './otlp-env.js';
import {
  logsEncoder,
  otlpAttribute,
  OtlpLogExporter,
  requestLogRecord,
  requestSpan,
} from './otlp-events.js';
import type { SpanContext } from './trace-context.js';

/** A local OTLP/HTTP receiver: answers each request with the next of `statuses` (then 200). */
async function receiver(statuses: number[] = []) {
  const bodies: Array<{ headers: Record<string, unknown>; body: unknown }> = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const status = statuses.shift() ?? 200;
      const raw = Buffer.concat(chunks);
      const body =
        req.headers['content-type'] === 'application/x-protobuf'
          ? decodeOtlp('logs', raw)
          : (JSON.parse(raw.toString()) as unknown);
      if (status === 200) bodies.push({ headers: req.headers, body });
      res.writeHead(status).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/logs`;
  return { url, bodies, close: () => new Promise((r) => server.close(r)) };
}

type Batch = { resourceLogs: Array<{ scopeLogs: Array<{ logRecords: Array<{ n: number }> }> }> };
const records = (bodies: Array<{ body: unknown }>) =>
  bodies.flatMap((b) =>
    (b.body as Batch).resourceLogs[0]!.scopeLogs[0]!.logRecords.map((r) => r.n),
  );

describe('OTLP log exporter', () => {
  const closing: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const close of closing.splice(0)) await close();
  });

  it('reads the standard variables: the signal endpoint first, headers URL-decoded, protobuf by default', () => {
    expect(otlpFromEnv({})).toBeUndefined();
    expect(otlpFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toEqual({
      url: 'http://c:4318/v1/logs',
      headers: {},
      protocol: 'http/protobuf',
    });
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'http://logs:4318/custom',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc,x-team=edge',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-team=traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
    };
    expect(otlpFromEnv(env)).toEqual({
      url: 'http://logs:4318/custom',
      headers: { authorization: 'Bearer abc', 'x-team': 'edge' },
      protocol: 'http/json',
    });
    expect(otlpFromEnv(env, 'traces')).toEqual({
      url: 'http://c:4318/v1/traces',
      headers: { authorization: 'Bearer abc', 'x-team': 'traces' },
      protocol: 'http/protobuf',
    });
    // The standard switches, and a protocol the edge does not speak named with its variable.
    expect(otlpFromEnv({ ...env, OTEL_TRACES_EXPORTER: 'none' }, 'traces')).toBeUndefined();
    expect(otlpFromEnv({ ...env, OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(() => otlpFromEnv({ ...env, OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: 'grpc' })).toThrow(
      'OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: must be one of http/protobuf, http/json (got grpc)',
    );
    expect(
      otlpResourceFromEnv({ OTEL_RESOURCE_ATTRIBUTES: 'service.name=a,deployment.environment=eu' }),
    ).toEqual([
      { key: 'service.name', value: { stringValue: 'a' } },
      { key: 'deployment.environment', value: { stringValue: 'eu' } },
    ]);
    expect(otlpResourceFromEnv({ OTEL_SERVICE_NAME: 'edge-eu' })[0]!.value).toEqual({
      stringValue: 'edge-eu',
    });
  });

  it("makes a traced request's SERVER span, and its log record in that span", () => {
    const trace: SpanContext = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '53995c3f42cd8ad8',
      parentSpanId: '00f067aa0ba902b7',
      flags: '01',
    };
    const answered = (status: number) => ({
      ...trafficRequest('app.example.com', {
        method: 'POST',
        path: '/orders',
        startedAt: 1_700_000_000_000,
        status,
        durationMs: 2.5,
        // The client's traceparent: the edge's span (trace) wins over it.
        requestHeaders: ['traceparent', '00-11111111111111111111111111111111-2222222222222222-01'],
      }),
      id: 'tr_9',
      seq: 9,
      credentialsShown: false,
      trace,
    });
    expect(requestSpan(answered(201))).toMatchObject({
      traceId: trace.traceId,
      spanId: trace.spanId,
      parentSpanId: trace.parentSpanId,
      name: 'POST app.example.com',
      kind: 2,
      startTimeUnixNano: '1700000000000000000',
      endTimeUnixNano: '1700000000002500000',
      status: { code: 0 },
      flags: 1,
    });
    expect(requestSpan(answered(502))?.status).toEqual({ code: 2, message: 'HTTP 502' });
    expect(requestLogRecord(answered(201), 1_700_000_000_005)).toMatchObject({
      traceId: trace.traceId,
      spanId: trace.spanId,
    });
    const untraced = { ...answered(201), trace: undefined };
    expect(requestSpan(untraced)).toBeUndefined();
  });

  it('sends protobuf when asked, which the official decoder reads', async () => {
    const r = await receiver();
    closing.push(r.close);
    const out = new OtlpLogExporter({ url: r.url, encode: logsEncoder('http/protobuf') });
    out.add(
      requestLogRecord(
        {
          ...trafficRequest('a.test', { status: 200 }),
          id: 'tr_1',
          seq: 1,
          credentialsShown: false,
        },
        Date.now(),
      ),
    );
    await out.flush();
    expect(r.bodies[0]!.headers['content-type']).toBe('application/x-protobuf');
    expect(JSON.stringify(r.bodies[0]!.body)).toContain('http_request_complete.v0');
  });

  it('carries the trace id of a valid traceparent the request came with, and only then', () => {
    const record = (headers: string[]) =>
      requestLogRecord(
        {
          ...trafficRequest('app.example.com', {
            scheme: 'https',
            startedAt: 1_700_000_000_000,
            requestHeaders: headers,
            status: 200,
            durationMs: 2,
          }),
          id: 'tr_1',
          seq: 1,
          credentialsShown: false,
        },
        1_700_000_000_005,
      );
    const traced = record([
      'Traceparent',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
    ]);
    expect(traced).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      timeUnixNano: '1700000000000000000',
    });
    for (const bad of [
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
      'garbage',
    ]) {
      expect(record(['traceparent', bad])).not.toHaveProperty('traceId');
    }
  });

  it('batches, and retries a batch the collector refuses for now, sending each record once', async () => {
    const r = await receiver([503, 429]);
    closing.push(r.close);
    const out = new OtlpLogExporter({
      url: r.url,
      headers: { 'x-team': 'edge' },
      maxBatch: 2,
      backoffMs: 1,
    });
    for (let n = 0; n < 5; n++) out.add({ n });
    await out.flush();
    expect(records(r.bodies)).toEqual([0, 1, 2, 3, 4]);
    expect(r.bodies.length).toBe(3);
    expect(r.bodies[0]!.headers['x-team']).toBe('edge');
    expect(out).toMatchObject({ sent: 5, dropped: 0, failed: 0 });
  });

  it('drops and counts past its bound instead of growing, and gives up a batch after its tries', async () => {
    const r = await receiver([500, 500]);
    closing.push(r.close);
    const losses: number[] = [];
    const out = new OtlpLogExporter({
      url: r.url,
      maxQueue: 2,
      maxBatch: 10,
      flushMs: 60_000,
      maxTries: 2,
      backoffMs: 1,
      onLoss: (what) => losses.push(what.dropped),
    });
    for (let n = 0; n < 5; n++) out.add({ n });
    expect(out.dropped).toBe(3);
    await out.flush();
    // The two kept were refused twice: given up, counted as dropped too.
    expect(out).toMatchObject({ dropped: 5, failed: 1, sent: 0 });
    expect(losses.at(-1)).toBe(5);
    out.add({ n: 9 });
    await out.flush();
    expect(records(r.bodies)).toEqual([9]);
  });

  it('loses a batch it cannot encode (counted), never throwing out of its timer', async () => {
    const losses: string[] = [];
    const out = new OtlpLogExporter({
      url: 'http://127.0.0.1:9/v1/logs',
      encode: () => {
        throw new Error('cannot encode');
      },
      onLoss: (what) => losses.push(what.error ?? ''),
    });
    out.add({ n: 1 });
    out.add({ n: 2 });
    await out.flush();
    expect(out).toMatchObject({ dropped: 2, failed: 1, sent: 0 });
    expect(losses).toEqual(['Error: cannot encode']);
    // An integer past 2^53 has no exact decimal text: it goes as a double.
    expect(otlpAttribute('big', 2 ** 70)).toEqual({ key: 'big', value: { doubleValue: 2 ** 70 } });
  });
});
