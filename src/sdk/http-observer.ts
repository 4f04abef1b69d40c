/**
 * A passive HTTP/1.1 observer for the request log: it watches the bytes of one proxied
 * connection in both directions and reports each exchange (method, path, status, duration)
 * without touching or buffering the traffic. Only message heads and chunk-size lines are parsed;
 * bodies are skipped by counting, so large uploads and downloads stay streamed and cheap.
 *
 * It gives up quietly on anything it does not understand (and after a protocol switch such as a
 * WebSocket upgrade), because the log must never break the connection it observes.
 */

/** One HTTP request that went through an endpoint. */
export interface HttpExchange {
  method: string;
  /** The request target as sent, e.g. `/search?q=x`. */
  path: string;
  /** The response status; 0 when the connection ended before a response. */
  status: number;
  /** From the first byte of the request to the end of the response. */
  durationMs: number;
  /** The public client's `ip:port`, as the edge reported it. */
  clientAddr: string;
  /** The request's bytes as forwarded (head and body), when the endpoint captures them. */
  request?: CapturedMessage;
  /** The response's bytes as the local service sent them, when the endpoint captures them. */
  response?: CapturedMessage;
}

/**
 * The first bytes of one HTTP message (head, then body as framed on the wire), kept for a local
 * inspector; `size` counts every byte, so `raw.length < size` says it was cut.
 */
export interface CapturedMessage {
  raw: Buffer;
  size: number;
}

/** The bytes of one message being kept, up to a limit. */
class Capture {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  size = 0;

  constructor(private readonly limit: number) {}

  keep(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.size += bytes.length;
    const room = this.limit - this.kept;
    if (room <= 0) return;
    // Copied: the chunk's buffer may be reused by the stream after the callback.
    const piece = Buffer.from(bytes.subarray(0, room));
    this.chunks.push(piece);
    this.kept += piece.length;
  }

  message(): CapturedMessage {
    return { raw: Buffer.concat(this.chunks), size: this.size };
  }
}

const MAX_HEAD = 64 * 1024;
const CRLF2 = Buffer.from('\r\n\r\n');

type BodyState =
  | { kind: 'none' }
  | { kind: 'fixed'; left: number }
  | { kind: 'chunked'; phase: 'size' | 'data' | 'trailer'; left: number; line: string }
  | { kind: 'until-close' };

interface Parsed {
  startLine: string;
  contentLength: number | undefined;
  chunked: boolean;
}

/** Split one message head into its start line and the framing headers. */
function parseHead(head: string): Parsed | undefined {
  const lines = head.split('\r\n');
  const startLine = lines[0] ?? '';
  let contentLength: number | undefined;
  let chunked = false;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-length') {
      if (!/^\d+$/.test(value)) return undefined;
      contentLength = Number(value);
    } else if (name === 'transfer-encoding') {
      chunked = value.toLowerCase().split(',').pop()!.trim() === 'chunked';
    }
  }
  return { startLine, contentLength, chunked };
}

/** Reads one direction: heads, then bodies skipped by their framing. */
class MessageReader {
  private head: Buffer[] = [];
  private headBytes = 0;
  /** The last bytes of the head so far, where a terminator may have begun. */
  private tail = Buffer.alloc(0);
  body: BodyState = { kind: 'none' };
  /** The message being read, kept when the observer captures (a new one at each head). */
  capture: Capture | undefined;
  private bodyEnded = false;

  constructor(
    private readonly onHead: (head: Parsed) => void,
    private readonly onBodyEnd: () => void,
    private readonly captureLimit = 0,
  ) {}

  private keep(bytes: Buffer): void {
    this.capture?.keep(bytes);
  }

  /** Returns false when the bytes cannot be followed any more. */
  push(chunk: Buffer): boolean {
    let at = 0;
    while (at < chunk.length) {
      if (this.body.kind === 'none') {
        const next = this.readHead(chunk, at);
        if (next < 0) return next === -1;
        at = next;
      } else {
        const from = at;
        at = this.skipBody(chunk, at);
        if (at < 0) return false;
        this.keep(chunk.subarray(from, at));
        if (this.bodyEnded) {
          this.bodyEnded = false;
          this.onBodyEnd();
        }
      }
    }
    return true;
  }

  /**
   * Index after the head, -1 when the head continues, -2 when it is broken. Each piece is searched
   * once (with the last 3 bytes before it, for a terminator split across pieces), and the head is
   * joined once, when it is complete: a head arriving in tiny pieces costs linear time.
   */
  private readHead(chunk: Buffer, from: number): number {
    let at = from;
    if (this.headBytes === 0) {
      // Leading blank lines between messages are allowed (RFC 9112 §2.2).
      while (at < chunk.length && (chunk[at] === 0x0d || chunk[at] === 0x0a)) at++;
      if (at === chunk.length) return -1;
      if (this.captureLimit > 0) this.capture = new Capture(this.captureLimit);
    }
    const piece = chunk.subarray(at);
    const before = this.headBytes;
    const window = this.tail.length > 0 ? Buffer.concat([this.tail, piece]) : piece;
    const hit = window.indexOf(CRLF2);
    this.headBytes += piece.length;
    if (hit < 0) {
      if (this.headBytes > MAX_HEAD) return -2;
      // Kept until the head is complete, so copied: the reader's memory is read into again once
      // the link has written it (a service socket reading into slabs, forward.ts).
      this.head.push(Buffer.from(piece));
      this.keep(piece);
      this.tail = Buffer.from(window.subarray(Math.max(0, window.length - 3)));
      return -1;
    }
    const end = before - this.tail.length + hit;
    this.head.push(piece);
    const joined = this.head.length === 1 ? piece : Buffer.concat(this.head);
    const parsed = parseHead(joined.toString('latin1', 0, end));
    this.head = [];
    this.headBytes = 0;
    this.tail = Buffer.alloc(0);
    if (!parsed) return -2;
    this.keep(piece.subarray(0, end + 4 - before));
    this.onHead(parsed);
    if (this.body.kind === 'none') this.onBodyEnd();
    return at + (end + 4 - before);
  }

  private skipBody(chunk: Buffer, at: number): number {
    const body = this.body;
    if (body.kind === 'until-close') return chunk.length;
    if (body.kind === 'fixed') {
      const take = Math.min(body.left, chunk.length - at);
      body.left -= take;
      if (body.left === 0) this.finishBody();
      return at + take;
    }
    if (body.kind !== 'chunked') return -1;
    while (at < chunk.length) {
      if (body.phase === 'data') {
        const take = Math.min(body.left, chunk.length - at);
        body.left -= take;
        at += take;
        if (body.left === 0) body.phase = 'size';
        continue;
      }
      const nl = chunk.indexOf(0x0a, at);
      const end = nl < 0 ? chunk.length : nl;
      body.line += chunk.toString('latin1', at, end);
      if (body.line.length > 4096) return -1;
      at = nl < 0 ? chunk.length : nl + 1;
      if (nl < 0) break;
      const line = body.line.replace(/\r$/, '');
      body.line = '';
      if (body.phase === 'trailer') {
        if (line === '') {
          this.finishBody();
          return at;
        }
        continue;
      }
      if (line === '') continue; // the CRLF after a chunk's data
      const size = parseInt(line.split(';')[0]!.trim(), 16);
      if (!Number.isFinite(size) || size < 0) return -1;
      if (size === 0) body.phase = 'trailer';
      else {
        body.phase = 'data';
        body.left = size;
      }
    }
    return at;
  }

  /** The body ended; `push` reports it once the bytes read with it are kept. */
  private finishBody(): void {
    this.body = { kind: 'none' };
    this.bodyEnded = true;
  }
}

interface Pending {
  method: string;
  path: string;
  startedAt: number;
  status: number;
  requestCapture: Capture | undefined;
  responseCapture: Capture | undefined;
}

/**
 * Follows one connection's HTTP/1.1 exchanges and calls `report` as each response ends.
 * @example
 * const observer = new HttpObserver('203.0.113.7:4000', (x) => console.log(x.method, x.path, x.status));
 * publicSide.on('data', (c) => observer.request(c)); localSide.on('data', (c) => observer.response(c));
 * localSide.once('close', () => observer.close());
 */
export class HttpObserver {
  private readonly pending: Pending[] = [];
  private current: Pending | undefined;
  private stopped = false;
  private readonly requests: MessageReader;
  private readonly responses: MessageReader;
  private requestStartedAt = 0;

  /**
   * `captureBytes` > 0 keeps up to that many bytes of each request and response (head and body)
   * in the reports, for a local inspector; 0 (the default) keeps nothing.
   */
  constructor(
    private readonly clientAddr: string,
    private readonly report: (exchange: HttpExchange) => void,
    captureBytes = 0,
  ) {
    this.requests = new MessageReader(
      (head) => this.onRequestHead(head),
      () => undefined,
      captureBytes,
    );
    this.responses = new MessageReader(
      (head) => this.onResponseHead(head),
      () => this.onResponseEnd(),
      captureBytes,
    );
  }

  /** Bytes from the public client. */
  request(chunk: Buffer): void {
    if (this.stopped) return;
    if (this.requests.body.kind === 'none' && this.requestStartedAt === 0) {
      this.requestStartedAt = performance.now();
    }
    if (!this.requests.push(chunk)) this.stopped = true;
  }

  /** Bytes from the local service. */
  response(chunk: Buffer): void {
    if (this.stopped) return;
    if (!this.responses.push(chunk)) this.stopped = true;
  }

  /** The connection ended: a response delimited by the close is complete now. */
  close(): void {
    if (this.current && this.responses.body.kind === 'until-close') this.onResponseEnd();
    this.stopped = true;
  }

  private onRequestHead(head: Parsed): void {
    if (this.stopped) return;
    const [method = '', path = ''] = head.startLine.split(' ');
    this.pending.push({
      method,
      path,
      startedAt: this.requestStartedAt,
      status: 0,
      requestCapture: this.requests.capture,
      responseCapture: undefined,
    });
    this.requestStartedAt = 0;
    this.requests.body = head.chunked
      ? { kind: 'chunked', phase: 'size', left: 0, line: '' }
      : head.contentLength
        ? { kind: 'fixed', left: head.contentLength }
        : { kind: 'none' };
  }

  private onResponseHead(head: Parsed): void {
    if (this.stopped) return;
    const status = Number(head.startLine.split(' ')[1]);
    const request = this.pending[0];
    if (!request || !Number.isInteger(status)) {
      this.stopped = true;
      return;
    }
    if (status >= 100 && status < 200 && status !== 101) return; // informational: more follows
    this.pending.shift();
    request.status = status;
    request.responseCapture = this.responses.capture;
    this.current = request;
    const upgraded = status === 101 || (request.method === 'CONNECT' && status < 300);
    if (upgraded) {
      // The rest is another protocol: report the switch and stop following.
      this.onResponseEnd();
      this.stopped = true;
      return;
    }
    const bodiless =
      request.method === 'HEAD' || status === 204 || status === 304 || request.method === 'CONNECT';
    this.responses.body = bodiless
      ? { kind: 'none' }
      : head.chunked
        ? { kind: 'chunked', phase: 'size', left: 0, line: '' }
        : head.contentLength !== undefined
          ? head.contentLength === 0
            ? { kind: 'none' }
            : { kind: 'fixed', left: head.contentLength }
          : { kind: 'until-close' };
  }

  private onResponseEnd(): void {
    const done = this.current;
    if (!done) return;
    this.current = undefined;
    this.report({
      method: done.method,
      path: done.path,
      status: done.status,
      durationMs: performance.now() - done.startedAt,
      clientAddr: this.clientAddr,
      ...(done.requestCapture && { request: done.requestCapture.message() }),
      ...(done.responseCapture && { response: done.responseCapture.message() }),
    });
  }
}
