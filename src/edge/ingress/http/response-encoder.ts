/**
 * compress-response on the relay's pipeline (both wires): the agent's body, without its HTTP/1.1
 * coding, goes through the encoder the policy chose, and what comes out goes to the client:
 * chunked on HTTP/1.1, as bytes until the connection closes on HTTP/1.0, as DATA frames on
 * HTTP/2. Back-pressure holds on both sides: a full encoder pauses the tunnel stream, a full
 * client pauses the encoder.
 */
import type { Transform } from 'node:stream';
import { createBrotliCompress, createDeflate, createGzip } from 'node:zlib';
import type { CompressionEncoding } from '../../../policy/index.js';

/**
 * The encoder compress-response chose.
 * @example body.pipe(compressor('gzip')).pipe(res)
 */
export function compressor(encoding: CompressionEncoding): Transform {
  if (encoding === 'br') return createBrotliCompress();
  return encoding === 'gzip' ? createGzip() : createDeflate();
}

/** Where the encoded body goes: the public socket, or an HTTP/2 stream. */
export interface EncodedSink {
  write(bytes: Buffer | string, encoding?: BufferEncoding): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/** What the body comes from: paused while the encoder is full. */
export interface BodySource {
  pause(): unknown;
  resume(): unknown;
}

/**
 * @example
 * const encoder = new ResponseEncoder('gzip', socket, true, stream);
 * encoder.write(bodyBytes); encoder.end(() => nextRequest());
 */
export class ResponseEncoder {
  private readonly zlib: Transform;
  private sourcePaused = false;

  constructor(
    encoding: CompressionEncoding,
    private readonly sink: EncodedSink,
    /** Frame the output as HTTP/1.1 chunks (and end it with the last chunk). */
    private readonly chunked: boolean,
    private readonly source: BodySource,
    /** The encoder failed: the client must see its response broken. */
    onError: () => void,
  ) {
    this.zlib = compressor(encoding);
    this.zlib.on('data', this.onEncoded);
    this.zlib.once('error', onError);
  }

  /** Body bytes (decoded) to encode. */
  write(bytes: Buffer): void {
    if (this.zlib.write(bytes) || this.sourcePaused) return;
    this.sourcePaused = true;
    this.source.pause();
    this.zlib.once('drain', this.resumeSource);
  }

  /** The body is complete: `done` once the encoder's last bytes went to the client. */
  end(done: () => void): void {
    // A writable that is ending never says 'drain': the source, done, reads on (its next exchange).
    if (this.sourcePaused) {
      this.zlib.off('drain', this.resumeSource);
      this.resumeSource();
    }
    this.zlib.once('end', () => {
      if (this.chunked) this.sink.write('0\r\n\r\n', 'latin1');
      done();
    });
    this.zlib.end();
  }

  /** The exchange ended early (the client or the agent left). */
  destroy(): void {
    this.zlib.destroy();
  }

  private readonly resumeSource = (): void => {
    this.sourcePaused = false;
    this.source.resume();
  };

  private readonly onEncoded = (out: Buffer): void => {
    const sink = this.sink;
    let ok: boolean;
    if (this.chunked) {
      sink.write(`${out.length.toString(16)}\r\n`, 'latin1');
      sink.write(out);
      ok = sink.write('\r\n', 'latin1');
    } else {
      ok = sink.write(out);
    }
    if (ok) return;
    this.zlib.pause();
    sink.once('drain', () => this.zlib.resume());
  };
}
