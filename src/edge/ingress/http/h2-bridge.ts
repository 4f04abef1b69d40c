/**
 * The tunnel stream of an HTTP/1.1 request to an endpoint bound with app protocol `http2` (a gRPC
 * or h2c service): the relay starts the call with the request's headers (`start`, in place of the
 * HTTP/1.1 head it writes to an agent), writes the body framed as the client framed it, and reads
 * an HTTP/1.1 response from it,
 * while the service gets an HTTP/2 call on the public connection's session to it (h2-upstream.ts
 * H2Upstreams, as h2-call.ts's calls do). Its answer comes back as HTTP/1.1: status and headers,
 * the data chunked, the trailers as the chunked body's. So the relay's one pipeline (routing,
 * policy, inspector, metrics) serves these requests too, without a second HTTP engine.
 *
 * One exchange per bridge: its response says `Connection: close`, so the relay lets it go after
 * the exchange instead of keeping it for the next one.
 */
import { STATUS_CODES } from 'node:http';
import {
  constants,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from 'node:http2';
import { Duplex } from 'node:stream';
import type { OnlineTunnel, ProxyInfo } from '../../registry/tunnel-registry.js';
import { ChunkedFramer, LengthFramer, type BodyFramer } from './body-framing.js';
import { CONNECTION_SPECIFIC, rawOf } from './h2-upstream.js';
import type { H2Upstreams } from './h2-upstream.js';

/** The end of the request body, for {@link H2Bridge.send}. */
const END = Buffer.alloc(0);

/** Statuses whose response has no body, whatever it says (RFC 9110 §6.4.1). */
function bodiless(status: number, method: string): boolean {
  return method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200);
}

/**
 * @example
 * const stream = new H2Bridge(upstreams, tunnel, publicSocket, proxyInfo);
 * stream.start(h2CallHeaders(exchange, 'https', ip), exchange.sent); // then read HTTP/1.1
 */
export class H2Bridge extends Duplex {
  private method = 'GET';
  /** The request's HTTP/1.x minor version: an HTTP/1.0 client reads no chunks. */
  private minor = 1;
  /** The request body's framer, while a body is still to come. */
  private body: BodyFramer | undefined;
  /** The service's stream, once its call is open. */
  private upstream: ClientHttp2Stream | undefined;
  /** Body bytes written before the call was open, in order. */
  private early: Buffer[] = [];
  /** The relay's write waiting for the call to open. */
  private whenOpen: (() => void) | undefined;
  private chunked = false;
  /** The body goes as it comes, to be read to the end (an HTTP/1.0 client's). */
  private raw = false;
  private trailers: IncomingHttpHeaders | undefined;
  /** The relay's side is full: the service's stream is paused until it reads again. */
  private full = false;

  constructor(
    private readonly upstreams: H2Upstreams,
    private readonly tunnel: OnlineTunnel,
    /** The public connection: calls share its session to the service. */
    private readonly connection: Duplex,
    private readonly info: ProxyInfo,
  ) {
    super({ allowHalfOpen: true });
  }

  /**
   * Open the call for the request the relay sends on this stream: its HTTP/2 headers
   * (exchange.ts h2CallHeaders), and how the body the relay then writes is framed (as the client
   * framed it, or chunked when a policy rewrites it).
   */
  start(
    headers: OutgoingHttpHeaders,
    request: {
      method: string;
      minor: number;
      chunked: boolean;
      contentLength?: number | undefined;
    },
  ): void {
    this.method = request.method;
    this.minor = request.minor;
    if (request.chunked) {
      this.body = new ChunkedFramer({
        data: (bytes) => this.send(bytes),
        trailer: () => undefined,
      });
    } else if (request.contentLength) {
      this.body = new LengthFramer(request.contentLength);
    }
    const endStream = this.body === undefined;
    this.upstreams.request(this.tunnel, this.connection, this.info, headers, endStream).then(
      (upstream) => this.adopt(upstream),
      (err: Error) => this.destroy(err),
    );
  }

  /** Body bytes from the relay, framed as {@link start} said. */
  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: () => void): void {
    this.requestBody(chunk);
    const upstream = this.upstream;
    // Until the call is open, the relay's next write waits: the body is not piled up meanwhile.
    if (!upstream && !this.destroyed) this.whenOpen = callback;
    else if (upstream?.writableNeedDrain) upstream.once('drain', callback);
    else callback();
  }

  private requestBody(chunk: Buffer): void {
    const framer = this.body;
    if (!framer || framer.done) return;
    const n = framer.take(chunk, 0);
    if (typeof n === 'string') {
      this.destroy(new Error(n));
      return;
    }
    // A chunked body reaches send() decoded, through the framer's parts.
    if (!(framer instanceof ChunkedFramer) && n > 0) {
      this.send(n === chunk.length ? chunk : chunk.subarray(0, n));
    }
    if (framer.done) this.send(END);
  }

  /** Body bytes for the service ({@link END}: the body is over). */
  private send(bytes: Buffer): void {
    const upstream = this.upstream;
    if (!upstream) this.early.push(bytes);
    else if (bytes === END) upstream.end();
    else upstream.write(bytes);
  }

  private adopt(upstream: ClientHttp2Stream): void {
    if (this.destroyed) {
      upstream.close(constants.NGHTTP2_CANCEL);
      return;
    }
    this.upstream = upstream;
    upstream.on('response', this.onResponse);
    upstream.on('trailers', (trailers: IncomingHttpHeaders) => (this.trailers = trailers));
    upstream.once('close', this.onClose);
    upstream.on('error', () => undefined);
    for (const bytes of this.early) this.send(bytes);
    this.early = [];
    const written = this.whenOpen;
    this.whenOpen = undefined;
    written?.();
  }

  private readonly onResponse = (headers: IncomingHttpHeaders): void => {
    const status = Number(headers[':status']);
    const noBody = bodiless(status, this.method);
    const endless = !noBody && !this.upstream!.endAfterHeaders;
    // An HTTP/1.0 client reads a body of unknown length to the connection's end (the relay closes
    // it after), without trailers.
    this.chunked = endless && this.minor === 1;
    this.raw = endless && this.minor === 0;
    let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    const raw = rawOf(headers);
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (CONNECTION_SPECIFIC.has(name) || (this.chunked && name === 'content-length')) continue;
      text += `${name}: ${raw[i + 1]}\r\n`;
    }
    if (this.chunked) text += 'transfer-encoding: chunked\r\n';
    else if (!noBody && !endless && headers['content-length'] === undefined) {
      // The stream ended with its headers: an empty body, said so.
      text += 'content-length: 0\r\n';
    }
    this.push(`${text}connection: close\r\n\r\n`, 'latin1');
    // Read only now: data that came in the same read as the headers may be emitted before them.
    const upstream = this.upstream!;
    upstream.on('data', this.onData);
    upstream.once('end', this.onEnd);
  };

  private readonly onData = (data: Buffer): void => {
    if (this.raw) {
      if (!this.push(data)) this.hold();
      return;
    }
    if (!this.chunked || data.length === 0) return;
    this.push(`${data.length.toString(16)}\r\n`, 'latin1');
    this.push(data);
    if (!this.push('\r\n', 'latin1')) this.hold();
  };

  /** The relay's side is full: the service's data waits until it reads again. */
  private hold(): void {
    this.full = true;
    this.upstream!.pause();
  }

  override _read(): void {
    // Only what the relay held back: before its response, the service's stream must not flow.
    if (!this.full) return;
    this.full = false;
    this.upstream?.resume();
  }

  private readonly onEnd = (): void => {
    if (this.chunked) {
      let text = '0\r\n';
      for (const [name, value] of Object.entries(this.trailers ?? {})) {
        if (name.startsWith(':') || value === undefined) continue;
        for (const v of Array.isArray(value) ? value : [value]) text += `${name}: ${v}\r\n`;
      }
      this.push(`${text}\r\n`, 'latin1');
    }
    this.push(null);
  };

  /** The service's stream closed: before its end, the exchange is broken. */
  private readonly onClose = (): void => {
    if (this.readableEnded || this.destroyed) return;
    const code = this.upstream?.rstCode ?? constants.NGHTTP2_INTERNAL_ERROR;
    if (!this.upstream?.readableEnded) {
      this.destroy(new Error(`the service reset the stream (code ${code})`));
    }
  };

  override _final(callback: () => void): void {
    callback();
  }

  override _destroy(err: Error | null, callback: (err: Error | null) => void): void {
    const upstream = this.upstream;
    if (upstream && !upstream.closed) upstream.close(constants.NGHTTP2_CANCEL);
    callback(err);
  }
}
