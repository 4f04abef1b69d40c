/**
 * The OTLP messages the edge sends, in both of OTLP/HTTP's encodings: protobuf (the
 * specification's default, `application/x-protobuf`) and JSON. The records are kept in OTLP's
 * JSON mapping (hex ids, 64-bit integers as decimal text), which the JSON encoding sends as it is
 * and the small protobuf writer here turns into the wire format of opentelemetry-proto
 * (`ExportLogsServiceRequest`, `ExportTraceServiceRequest`), so the edge needs no protobuf
 * runtime for the handful of messages it writes. Field numbers are those of opentelemetry-proto
 * v1 (common, resource, logs, trace); src/edge/metrics/otlp-protobuf.test.ts decodes what this
 * writes with the OpenTelemetry packages' own generated definitions.
 */

/** An attribute value: OTLP's `AnyValue` with the kinds the edge sends. */
export type OtlpAnyValue =
  { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean };

/** An OTLP attribute. */
export interface KeyValue {
  key: string;
  value: OtlpAnyValue;
}

/** A log record (opentelemetry.proto.logs.v1.LogRecord) in the JSON mapping. */
export interface OtlpLogRecord {
  timeUnixNano: string;
  observedTimeUnixNano: string;
  severityNumber: number;
  severityText: string;
  body: OtlpAnyValue;
  attributes: KeyValue[];
  traceId?: string | undefined;
  spanId?: string | undefined;
}

/** A span (opentelemetry.proto.trace.v1.Span) in the JSON mapping. */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string | undefined;
  name: string;
  /** SpanKind: 2 is SERVER. */
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: KeyValue[];
  /** StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string | undefined };
  /** W3C trace flags in the low 8 bits. */
  flags?: number | undefined;
}

/** Who sends: the resource's attributes (`service.name`, …) and the instrumentation scope. */
export interface OtlpOrigin {
  resource: KeyValue[];
  scope: string;
}

const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;

/** An append-only protobuf encoder: fields are written in the order given. */
class ProtoWriter {
  private buf = Buffer.allocUnsafe(256);
  private at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }

  /** An unsigned varint; 64-bit values (and negative int64s, two's complement) as bigint. */
  varint(value: number | bigint): void {
    this.room(10);
    if (typeof value === 'number' && value >= 0 && value < 0x80000000) {
      // Tags, lengths and enums: plain number arithmetic, no bigint per field.
      let n = value;
      while (n > 0x7f) {
        this.buf[this.at++] = (n & 0x7f) | 0x80;
        n >>>= 7;
      }
      this.buf[this.at++] = n;
      return;
    }
    let v = BigInt.asUintN(64, BigInt(value));
    while (v > 0x7fn) {
      this.buf[this.at++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.at++] = Number(v);
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  fixed64(field: number, value: bigint): void {
    this.tag(field, FIXED64);
    this.room(8);
    this.buf.writeBigUInt64LE(BigInt.asUintN(64, value), this.at);
    this.at += 8;
  }

  fixed32(field: number, value: number): void {
    this.tag(field, FIXED32);
    this.room(4);
    this.buf.writeUInt32LE(value >>> 0, this.at);
    this.at += 4;
  }

  double(field: number, value: number): void {
    this.tag(field, FIXED64);
    this.room(8);
    this.buf.writeDoubleLE(value, this.at);
    this.at += 8;
  }

  bytes(field: number, value: Uint8Array): void {
    this.tag(field, LENGTH);
    this.varint(value.length);
    this.room(value.length);
    this.buf.set(value, this.at);
    this.at += value.length;
  }

  string(field: number, value: string): void {
    this.bytes(field, Buffer.from(value, 'utf8'));
  }

  /** A nested message, written by `body` into its own writer (messages here are small). */
  message(field: number, body: (w: ProtoWriter) => void): void {
    const inner = new ProtoWriter();
    body(inner);
    this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    return this.buf.subarray(0, this.at);
  }
}

function anyValue(w: ProtoWriter, value: OtlpAnyValue): void {
  if ('stringValue' in value) w.string(1, value.stringValue);
  else if ('boolValue' in value) {
    w.tag(2, VARINT);
    w.varint(value.boolValue ? 1 : 0);
  } else if ('intValue' in value) {
    w.tag(3, VARINT);
    w.varint(BigInt(value.intValue));
  } else w.double(4, value.doubleValue);
}

function keyValues(w: ProtoWriter, field: number, attributes: readonly KeyValue[]): void {
  for (const kv of attributes) {
    w.message(field, (m) => {
      m.string(1, kv.key);
      m.message(2, (v) => anyValue(v, kv.value));
    });
  }
}

/** Hex ids as bytes; an absent or empty id is left out (proto3's default). */
function hexId(w: ProtoWriter, field: number, hex: string | undefined): void {
  if (hex) w.bytes(field, Buffer.from(hex, 'hex'));
}

function enumField(w: ProtoWriter, field: number, value: number): void {
  if (value === 0) return;
  w.tag(field, VARINT);
  w.varint(value);
}

/** ResourceLogs / ResourceSpans: the resource (1), one scope block (2) holding `items` (2). */
function resourceBlock<T>(
  origin: OtlpOrigin,
  items: readonly T[],
  item: (w: ProtoWriter, value: T) => void,
): Uint8Array {
  const w = new ProtoWriter();
  w.message(1, (block) => {
    block.message(1, (resource) => keyValues(resource, 1, origin.resource));
    block.message(2, (scoped) => {
      scoped.message(1, (scope) => scope.string(1, origin.scope));
      for (const value of items) scoped.message(2, (m) => item(m, value));
    });
  });
  return w.finish();
}

function logRecord(w: ProtoWriter, r: OtlpLogRecord): void {
  w.fixed64(1, BigInt(r.timeUnixNano));
  enumField(w, 2, r.severityNumber);
  if (r.severityText) w.string(3, r.severityText);
  w.message(5, (v) => anyValue(v, r.body));
  keyValues(w, 6, r.attributes);
  hexId(w, 9, r.traceId);
  hexId(w, 10, r.spanId);
  w.fixed64(11, BigInt(r.observedTimeUnixNano));
}

function span(w: ProtoWriter, s: OtlpSpan): void {
  hexId(w, 1, s.traceId);
  hexId(w, 2, s.spanId);
  hexId(w, 4, s.parentSpanId);
  w.string(5, s.name);
  enumField(w, 6, s.kind);
  w.fixed64(7, BigInt(s.startTimeUnixNano));
  w.fixed64(8, BigInt(s.endTimeUnixNano));
  keyValues(w, 9, s.attributes);
  w.message(15, (status) => {
    if (s.status.message) status.string(2, s.status.message);
    enumField(status, 3, s.status.code);
  });
  if (s.flags !== undefined) w.fixed32(16, s.flags);
}

/**
 * An `ExportLogsServiceRequest` carrying `records`, as protobuf.
 * @example await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: encodeLogsRequest(origin, records) });
 */
export function encodeLogsRequest(
  origin: OtlpOrigin,
  records: readonly OtlpLogRecord[],
): Uint8Array {
  return resourceBlock(origin, records, logRecord);
}

/**
 * An `ExportTraceServiceRequest` carrying `spans`, as protobuf.
 * @example await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: encodeTraceRequest(origin, spans) });
 */
export function encodeTraceRequest(origin: OtlpOrigin, spans: readonly OtlpSpan[]): Uint8Array {
  return resourceBlock(origin, spans, span);
}

/**
 * The same requests in OTLP/HTTP JSON (`application/json`).
 * @example jsonLogsRequest(origin, records) // '{"resourceLogs":[…]}'
 */
export function jsonLogsRequest(origin: OtlpOrigin, records: readonly OtlpLogRecord[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: origin.resource },
        scopeLogs: [{ scope: { name: origin.scope }, logRecords: records }],
      },
    ],
  });
}

/** @example jsonTraceRequest(origin, spans) // '{"resourceSpans":[…]}' */
export function jsonTraceRequest(origin: OtlpOrigin, spans: readonly OtlpSpan[]): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: origin.resource },
        scopeSpans: [{ scope: { name: origin.scope }, spans }],
      },
    ],
  });
}
