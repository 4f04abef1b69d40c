import { describe, expect, it } from 'vitest';
import { decodeOtlp } from '../../../test/support/otlp-receiver.js';
import {
  encodeLogsRequest,
  encodeTraceRequest,
  jsonLogsRequest,
  jsonTraceRequest,
  type OtlpLogRecord,
  type OtlpOrigin,
  type OtlpSpan,
} from './otlp-protobuf.js';

/**
 * The protobuf writer round-trips through the OpenTelemetry packages' own generated decoder
 * (@opentelemetry/otlp-transformer), and decodes to what the JSON encoding sends: one model,
 * two encodings, read alike by a collector.
 */

const origin: OtlpOrigin = {
  resource: [{ key: 'service.name', value: { stringValue: 'burrow' } }],
  scope: 'burrow.traffic',
};

const record: OtlpLogRecord = {
  timeUnixNano: '1700000000123000000',
  observedTimeUnixNano: '1700000000125000000',
  severityNumber: 9,
  severityText: 'INFO',
  body: { stringValue: 'GET app.example.com/ü 200' },
  attributes: [
    { key: 'event.name', value: { stringValue: 'http_request_complete.v0' } },
    { key: 'http.response.status_code', value: { intValue: '200' } },
    { key: 'negative', value: { intValue: '-3' } },
    { key: 'big', value: { intValue: '9007199254740993' } },
    { key: 'burrow.duration_ms', value: { doubleValue: 2.5 } },
    { key: 'flag', value: { boolValue: true } },
    { key: 'off', value: { boolValue: false } },
    { key: 'empty', value: { stringValue: '' } },
  ],
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
};

const span: OtlpSpan = {
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '53995c3f42cd8ad8',
  parentSpanId: '00f067aa0ba902b7',
  name: 'GET app.example.com',
  kind: 2,
  startTimeUnixNano: '1700000000123000000',
  endTimeUnixNano: '1700000000125500000',
  attributes: [{ key: 'http.request.method', value: { stringValue: 'GET' } }],
  status: { code: 2, message: 'HTTP 502' },
  flags: 1,
};

/** What the official decoder leaves out (proto3 defaults), so both sides compare alike. */
function withoutDefaults<T>(value: T): T {
  return JSON.parse(
    JSON.stringify(value, (_key, v: unknown) =>
      v === false || v === '' || v === 0 ? undefined : v,
    ),
  ) as T;
}

describe('OTLP protobuf writer', () => {
  it('writes an ExportLogsServiceRequest the official decoder reads as the JSON encoding says', () => {
    const decoded = decodeOtlp('logs', encodeLogsRequest(origin, [record, record]));
    expect(withoutDefaults(decoded)).toEqual(
      withoutDefaults(JSON.parse(jsonLogsRequest(origin, [record, record]))),
    );
    // The values proto3 leaves implicit are there on the wire all the same.
    const attrs = (
      decoded as {
        resourceLogs: Array<{
          scopeLogs: Array<{ logRecords: Array<{ attributes: Array<{ value: object }> }> }>;
        }>;
      }
    ).resourceLogs[0]!.scopeLogs[0]!.logRecords[0]!.attributes;
    expect(attrs.map((a) => a.value)).toEqual([
      { stringValue: 'http_request_complete.v0' },
      { intValue: '200' },
      { intValue: '-3' },
      { intValue: '9007199254740993' },
      { doubleValue: 2.5 },
      { boolValue: true },
      { boolValue: false },
      { stringValue: '' },
    ]);
  });

  it('writes an ExportTraceServiceRequest with ids, kind, times, status and flags', () => {
    const decoded = decodeOtlp('traces', encodeTraceRequest(origin, [span]));
    expect(decoded).toEqual(JSON.parse(jsonTraceRequest(origin, [span])));
    const unset = { ...span, parentSpanId: undefined, status: { code: 0 }, flags: undefined };
    const root = decodeOtlp('traces', encodeTraceRequest(origin, [unset])) as {
      resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>;
    };
    const got = root.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
    expect(got).not.toHaveProperty('parentSpanId');
    expect(got.status).toEqual({});
  });

  it('grows past its first buffer for large batches', () => {
    const many = Array.from({ length: 500 }, (_, i) => ({
      ...record,
      body: { stringValue: `request ${i}` },
    }));
    const decoded = decodeOtlp('logs', encodeLogsRequest(origin, many)) as {
      resourceLogs: Array<{ scopeLogs: Array<{ logRecords: Array<{ body: object }> }> }>;
    };
    const bodies = decoded.resourceLogs[0]!.scopeLogs[0]!.logRecords.map((r) => r.body);
    expect(bodies).toHaveLength(500);
    expect(bodies[499]).toEqual({ stringValue: 'request 499' });
  });
});
