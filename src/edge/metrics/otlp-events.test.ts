import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import { OtlpLogExporter, otlpFromEnv, requestLogRecord } from './otlp-events.js';

/** A local OTLP/HTTP receiver: answers each request with the next of `statuses` (then 200). */
async function receiver(statuses: number[] = []) {
  const bodies: Array<{ headers: Record<string, unknown>; body: unknown }> = [];
  const server: Server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8').on('data', (d: string) => (text += d));
    req.on('end', () => {
      const status = statuses.shift() ?? 200;
      if (status === 200) bodies.push({ headers: req.headers, body: JSON.parse(text) });
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

  it('reads the standard variables: the logs endpoint first, headers URL-decoded', () => {
    expect(otlpFromEnv({})).toBeUndefined();
    expect(otlpFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })?.url).toBe(
      'http://c:4318/v1/logs',
    );
    expect(
      otlpFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: 'http://logs:4318/custom',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc,x-team=edge',
      }),
    ).toEqual({
      url: 'http://logs:4318/custom',
      headers: { authorization: 'Bearer abc', 'x-team': 'edge' },
    });
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
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
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
});
