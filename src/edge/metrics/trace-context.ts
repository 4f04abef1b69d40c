/**
 * W3C Trace Context for the edge's own span of a request (issue 33): the trace continues the one
 * the request came with (a valid `traceparent`), or starts afresh; the edge's span gets an id of
 * its own, and the service is told that span as its parent, so a trace spans client, edge and app.
 * Made only while traces are exported (the ingress asks), so requests are not altered otherwise.
 */
import { randomBytes } from 'node:crypto';

/** The edge's span of one request, as its trace export and the forwarded `traceparent` need it. */
export interface SpanContext {
  /** 32 lower-case hex digits: the incoming trace's, or a fresh one. */
  traceId: string;
  /** 16 lower-case hex digits: the edge's span, the parent the service is told of. */
  spanId: string;
  /** The span the request came from (its `traceparent`'s parent id), when it came with one. */
  parentSpanId: string | undefined;
  /** Two hex digits: the incoming trace flags (the caller's sampling decision), else `01`. */
  flags: string;
}

/**
 * Version, trace id, parent id, flags; a later version may add fields after a dash (W3C Trace
 * Context §3.2.4: parse what this version knows), version `ff` is invalid.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZEROS = /^0+$/;

/**
 * The trace id, parent id and flags of a `traceparent` value; undefined when it is not valid
 * (bad syntax, version ff, an all-zero id, or extra fields on version 00).
 * @example parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') // { traceId: '4bf9…', parentId: '00f0…', flags: '01' }
 */
export function parseTraceparent(
  value: string,
): { traceId: string; parentId: string; flags: string } | undefined {
  const m = TRACEPARENT.exec(value.trim().toLowerCase());
  if (!m || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined;
  if (ZEROS.test(m[2]!) || ZEROS.test(m[3]!)) return undefined;
  return { traceId: m[2]!, parentId: m[3]!, flags: m[4]! };
}

/**
 * The `traceparent` value of `raw` headers (Node's `rawHeaders`: names and values alternating),
 * parsed; undefined when there is none or it is not valid. Two of them make it invalid too (W3C:
 * a vendor that cannot tell which one holds must restart the trace).
 * @example incomingTrace(req.rawHeaders)?.traceId
 */
export function incomingTrace(
  raw: readonly string[],
): ReturnType<typeof parseTraceparent> | undefined {
  let value: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 11 || name.toLowerCase() !== 'traceparent') continue;
    if (value !== undefined) return undefined;
    value = raw[i + 1]!;
  }
  return value === undefined ? undefined : parseTraceparent(value);
}

/** Random hex ids, never all zeros (which W3C reserves for "no id"). */
function randomId(bytes: number): string {
  for (;;) {
    const id = randomBytes(bytes).toString('hex');
    if (!ZEROS.test(id)) return id;
  }
}

/**
 * The edge's span of a request with `raw` headers: in the trace its `traceparent` names when
 * valid, else in a new one; with a new span id either way.
 * @example const span = startSpan(req.rawHeaders); forwardedHeaders(raw, framing, { ...options, span });
 */
export function startSpan(raw: readonly string[]): SpanContext {
  const incoming = incomingTrace(raw);
  return {
    traceId: incoming?.traceId ?? randomId(16),
    spanId: randomId(8),
    parentSpanId: incoming?.parentId,
    flags: incoming?.flags ?? '01',
  };
}

/**
 * The `traceparent` the service gets: the span's trace, the edge's span as its parent.
 * @example traceparentOf(span) // '00-4bf92f3577b34da6a3ce929d0e0e4736-53995c3f42cd8ad8-01'
 */
export function traceparentOf(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-${span.flags}`;
}
