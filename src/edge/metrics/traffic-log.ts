/**
 * The traffic inspector's memory: the last requests of each HTTP endpoint (by public host name),
 * kept in this process only, with fixed caps so that it can never grow with traffic. Bodies are
 * kept only for hosts whose capture is switched on, and only their first {@link BODY_CAP} bytes.
 * Visitors' credentials are redacted as a request is recorded (traffic-redact.ts), unless its host
 * shows them.
 */
import { Ring } from '../../core/ring.js';
import { LRUCache } from 'lru-cache';
import type { SpanContext } from './trace-context.js';
import { CredentialRedactor } from './traffic-redact.js';

/** Header set on replayed requests so the inspector can link a replay to its original. */
export const REPLAY_HEADER = 'x-burrow-replay-of';

/** Requests kept per host; the oldest goes first. */
export const PER_HOST_CAP = 100;
/** Hosts kept; the host that saw traffic least recently goes first. */
export const HOST_CAP = 200;
/** Bytes of each body kept when capture is on. */
export const BODY_CAP = 64 * 1024;

/**
 * Names and values alternating (Node's `rawHeaders`) as `[name, value]` pairs.
 * @example headerPairs(['Host', 'a.example.com']) // [['Host', 'a.example.com']]
 */
export function headerPairs(raw: readonly string[]): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
  return pairs;
}

/**
 * Response headers (names and values alternating, as the agent sent them) as `[name, value]`
 * pairs with lower-case names, in the order they came.
 * @example responsePairs(['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']) // [['set-cookie', 'a=1'], ['set-cookie', 'b=2']]
 */
export function responsePairs(raw: readonly string[]): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i]!.toLowerCase(), raw[i + 1]!]);
  return pairs;
}

/** A captured body: at most {@link BODY_CAP} bytes, and whether more was sent. */
export interface CapturedBody {
  bytes: Buffer;
  size: number;
  truncated: boolean;
}

/** One request through the HTTP ingress, as the inspector shows it. */
export interface TrafficRecord {
  /** `tr_<n>`: increasing within the process, so `after` cursors are plain comparisons. */
  id: string;
  seq: number;
  host: string;
  tunnelId: string;
  /** `http` or `https`: how the client reached the ingress. */
  scheme: string;
  /** Epoch milliseconds. */
  startedAt: number;
  method: string;
  path: string;
  clientIp: string;
  /**
   * As Node read them: names and values alternating. Kept as they are and paired only when shown
   * (see {@link headerPairs}): every request is recorded, few are ever looked at.
   */
  requestHeaders: readonly string[];
  /** Absent until the response has started. */
  status: number | undefined;
  /**
   * As the client got them: names and values alternating, kept as they are and paired only when
   * shown ({@link responsePairs}), like the request's; empty until the response has started.
   */
  responseHeaders: readonly string[];
  /** Absent while the request is in flight. */
  durationMs: number | undefined;
  /** Present only when capture was on for the host when the request arrived. */
  requestBody: CapturedBody | undefined;
  responseBody: CapturedBody | undefined;
  /** The record this one replays, when it came from the replay button. */
  replayOf: string | undefined;
  /**
   * True when its host showed credentials as it was recorded; otherwise the values of the
   * redacted headers (both ways) were replaced before the record was kept.
   */
  credentialsShown: boolean;
  /** The edge's span of the request, made only while traces are exported (trace-context.ts). */
  trace?: SpanContext | undefined;
}

/** What the tap fills in once a request is answered (or given up). */
export type TrafficAnswer = Pick<
  TrafficRecord,
  'status' | 'responseHeaders' | 'durationMs' | 'requestBody' | 'responseBody'
>;

export interface TrafficLogOptions {
  /** Header names redacted besides the four credential headers (`--inspect-redact-header`). */
  redactHeaders?: readonly string[];
  /** Told of each answered request, redacted as kept (traffic events out: otlp-events.ts). */
  onAnswered?: ((record: TrafficRecord) => void) | undefined;
}

/** Accumulates one body up to the cap. */
export class BodyBuffer {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  size = 0;

  add(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.size += buf.length;
    if (this.kept >= BODY_CAP) return;
    const part = buf.subarray(0, BODY_CAP - this.kept);
    this.chunks.push(Buffer.from(part));
    this.kept += part.length;
  }

  done(): CapturedBody {
    return { bytes: Buffer.concat(this.chunks), size: this.size, truncated: this.size > this.kept };
  }
}

/**
 * Per-host ring buffers of {@link TrafficRecord}s, and which hosts capture bodies.
 * @example const log = new TrafficLog(); log.setCapture('app.example.com', true); log.list({ host: 'app.example.com' });
 */
export class TrafficLog {
  /** Past HOST_CAP, the host that saw traffic least recently goes. */
  private readonly byHost = new LRUCache<string, Ring<TrafficRecord>>({ max: HOST_CAP });
  private readonly capture = new Set<string>();
  /** Hosts whose credentials are kept in clear: each an explicit choice (`PUT /traffic/credentials`). */
  private readonly shown = new Set<string>();
  private seq = 0;
  readonly redactor: CredentialRedactor;

  private readonly onAnswered: ((record: TrafficRecord) => void) | undefined;

  constructor(options: TrafficLogOptions = {}) {
    this.redactor = new CredentialRedactor(options.redactHeaders);
    this.onAnswered = options.onAnswered;
  }

  /** Bodies are captured for `host` from now on (or no longer). */
  setCapture(host: string, enabled: boolean): void {
    if (enabled) this.capture.add(host.toLowerCase());
    else this.capture.delete(host.toLowerCase());
  }

  captures(host: string): boolean {
    return this.capture.has(host.toLowerCase());
  }

  capturedHosts(): string[] {
    return [...this.capture].sort();
  }

  /** Credentials are kept in clear for `host`'s requests from now on (or redacted again). */
  setCredentialsShown(host: string, shown: boolean): void {
    if (shown) this.shown.add(host.toLowerCase());
    else this.shown.delete(host.toLowerCase());
  }

  credentialsShownHosts(): string[] {
    return [...this.shown].sort();
  }

  /**
   * Keep a new record (the tap fills in the answer later with {@link answer}); drops the oldest
   * beyond the caps. Its credentials are redacted here, before anything keeps them. `record`
   * becomes the kept record: pass one made for the call.
   */
  add(record: Omit<TrafficRecord, 'id' | 'seq' | 'credentialsShown'>): TrafficRecord {
    const seq = ++this.seq;
    const host = record.host.toLowerCase();
    const credentialsShown = this.shown.has(host);
    // Completed in place, property by property, not copied: V8 builds `{ ...record, more }` on a
    // slow path (~5 µs per request here), and Object.assign from a literal goes through its
    // generic property copy. The taps hand over a record of their own, made for this call.
    const full = record as TrafficRecord;
    if (!credentialsShown) {
      full.requestHeaders = this.redactor.rawHeaders(record.requestHeaders);
      full.responseHeaders = this.redactor.rawHeaders(record.responseHeaders);
    }
    full.credentialsShown = credentialsShown;
    full.id = `tr_${seq}`;
    full.seq = seq;
    // get() makes the host the most recent; set() drops the least recent one past HOST_CAP.
    let kept = this.byHost.get(host);
    if (!kept) this.byHost.set(host, (kept = new Ring(PER_HOST_CAP)));
    kept.push(full);
    return full;
  }

  /** Fill in `record`'s answer, its response headers redacted as its request's were. */
  answer(record: TrafficRecord, answer: TrafficAnswer): void {
    record.status = answer.status;
    record.responseHeaders = record.credentialsShown
      ? answer.responseHeaders
      : this.redactor.rawHeaders(answer.responseHeaders);
    record.durationMs = answer.durationMs;
    record.requestBody = answer.requestBody;
    record.responseBody = answer.responseBody;
    this.onAnswered?.(record);
  }

  /** Newest first; only `host`'s when given, only those after the cursor `afterSeq` when given. */
  list(filter: {
    host?: string | undefined;
    afterSeq?: number | undefined;
    limit?: number;
  }): TrafficRecord[] {
    const lists = filter.host
      ? [this.byHost.peek(filter.host.toLowerCase())?.list() ?? []]
      : [...this.byHost.values()].map((kept) => kept.list());
    const after = filter.afterSeq ?? 0;
    return lists
      .flat()
      .filter((r) => r.seq > after)
      .sort((a, b) => b.seq - a.seq)
      .slice(0, filter.limit ?? PER_HOST_CAP);
  }

  get(id: string): TrafficRecord | undefined {
    const seq = /^tr_(\d+)$/.exec(id)?.[1];
    if (seq === undefined) return undefined;
    for (const kept of this.byHost.values()) {
      const found = kept.list().find((r) => r.seq === Number(seq));
      if (found) return found;
    }
    return undefined;
  }

  /** Hosts with records, most recent traffic first. */
  hosts(): string[] {
    return [...this.byHost.keys()];
  }
}
