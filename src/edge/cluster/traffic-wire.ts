/**
 * Traffic records as they cross a node link (cluster-traffic.ts): JSON, bodies in base64, and
 * checked field by field on the way in, so that a peer of another version fails one answer with a
 * clear error instead of handing the API something of the wrong shape.
 */
import { BurrowError, CODES } from '../../core/errors.js';
import type { CapturedBody, TrafficRecord } from '../metrics/traffic-log.js';
import type { SpanContext } from '../metrics/trace-context.js';
import type { TrafficSummary } from '../metrics/traffic-view.js';

/** A captured body on the wire. */
interface WireBody {
  base64: string;
  size: number;
  truncated: boolean;
}

/** A TrafficRecord on the wire: the same fields, bodies in base64. */
export type WireRecord = Omit<TrafficRecord, 'requestBody' | 'responseBody'> & {
  requestBody: WireBody | undefined;
  responseBody: WireBody | undefined;
};

function wireBody(body: CapturedBody | undefined): WireBody | undefined {
  return (
    body && { base64: body.bytes.toString('base64'), size: body.size, truncated: body.truncated }
  );
}

/**
 * `record` ready for JSON.
 * @example JSON.stringify(recordToWire(log.get('tr_1')!))
 */
export function recordToWire(record: TrafficRecord): WireRecord {
  return {
    ...record,
    requestBody: wireBody(record.requestBody),
    responseBody: wireBody(record.responseBody),
  };
}

function bad(node: string, what: string): BurrowError {
  return new BurrowError(
    CODES.nodeLinkProtocol,
    502,
    `node ${node} sent a traffic record whose ${what} is not what this version reads`,
    { node },
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

type Fields = Record<string, unknown>;

function str(v: Fields, key: string, node: string): string {
  const value = v[key];
  if (typeof value !== 'string') throw bad(node, key);
  return value;
}

function num(v: Fields, key: string, node: string): number {
  const value = v[key];
  if (typeof value !== 'number' || !Number.isFinite(value)) throw bad(node, key);
  return value;
}

function optional<T>(v: Fields, key: string, read: () => T): T | undefined {
  return v[key] === undefined || v[key] === null ? undefined : read();
}

function bool(v: Fields, key: string, node: string): boolean {
  const value = v[key];
  if (typeof value !== 'boolean') throw bad(node, key);
  return value;
}

function body(v: Fields, key: string, node: string): CapturedBody | undefined {
  return optional(v, key, () => {
    const b = v[key];
    if (!isObject(b)) throw bad(node, key);
    return {
      bytes: Buffer.from(str(b, 'base64', node), 'base64'),
      size: num(b, 'size', node),
      truncated: bool(b, 'truncated', node),
    };
  });
}

/**
 * Response headers as a node sends them: names and values alternating; from a node of a release
 * before 2026-11-29, an object as Node's `getHeaders()` gives it (lower-case names, repeats in
 * arrays), turned into the list.
 */
function headerValues(value: unknown, node: string): readonly string[] {
  if (Array.isArray(value)) {
    if (value.length % 2 === 0 && value.every((v) => typeof v === 'string')) return value;
    throw bad(node, 'responseHeaders');
  }
  if (!isObject(value)) throw bad(node, 'responseHeaders');
  const raw: string[] = [];
  for (const [name, v] of Object.entries(value)) {
    if (typeof v === 'string' || typeof v === 'number') raw.push(name, String(v));
    else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) {
      for (const x of v) raw.push(name, x);
    } else throw bad(node, 'responseHeaders');
  }
  return raw;
}

/** The edge's span of the request (events and traces name it), when it had one. */
function trace(v: Fields, node: string): SpanContext | undefined {
  return optional(v, 'trace', () => {
    const t = v.trace;
    if (!isObject(t)) throw bad(node, 'trace');
    return {
      traceId: str(t, 'traceId', node),
      spanId: str(t, 'spanId', node),
      parentSpanId: optional(t, 'parentSpanId', () => str(t, 'parentSpanId', node)),
      flags: str(t, 'flags', node),
    };
  });
}

/** The fields a summary and a record share. */
function common(v: Fields, node: string) {
  return {
    host: str(v, 'host', node),
    tunnelId: str(v, 'tunnelId', node),
    scheme: str(v, 'scheme', node),
    startedAt: num(v, 'startedAt', node),
    method: str(v, 'method', node),
    path: str(v, 'path', node),
    clientIp: str(v, 'clientIp', node),
    status: optional(v, 'status', () => num(v, 'status', node)),
    durationMs: optional(v, 'durationMs', () => num(v, 'durationMs', node)),
    replayOf: optional(v, 'replayOf', () => str(v, 'replayOf', node)),
    credentialsShown: bool(v, 'credentialsShown', node),
  };
}

/**
 * A record `node` sent, checked.
 * @example const record = recordFromWire(reply, 'edge-b');
 */
export function recordFromWire(value: unknown, node: string): TrafficRecord {
  if (!isObject(value)) throw bad(node, 'shape');
  const headers = value.requestHeaders;
  if (!Array.isArray(headers) || !headers.every((h) => typeof h === 'string')) {
    throw bad(node, 'requestHeaders');
  }
  return {
    ...common(value, node),
    id: str(value, 'id', node),
    seq: num(value, 'seq', node),
    requestHeaders: headers,
    responseHeaders: headerValues(value.responseHeaders, node),
    requestBody: body(value, 'requestBody', node),
    responseBody: body(value, 'responseBody', node),
    trace: trace(value, node),
  };
}

/** A summary on the wire: its node's own id (`tr_<n>`) and sequence number. */
export type WireSummary = Omit<TrafficSummary, 'node'> & { seq: number };

/**
 * A summary `node` sent, checked; its id is still the node's own.
 * @example summaryFromWire(item, 'edge-b').seq
 */
export function summaryFromWire(value: unknown, node: string): WireSummary {
  if (!isObject(value)) throw bad(node, 'shape');
  return {
    ...common(value, node),
    id: str(value, 'id', node),
    seq: num(value, 'seq', node),
    captured: bool(value, 'captured', node),
  };
}

/**
 * A list of strings `node` sent (hosts, header names), at most `max` of them.
 * @example stringsFromWire(['a.example.com'], 'edge-b', 'hosts', 200)
 */
export function stringsFromWire(value: unknown, node: string, what: string, max: number): string[] {
  if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) throw bad(node, what);
  return value.slice(0, max);
}
