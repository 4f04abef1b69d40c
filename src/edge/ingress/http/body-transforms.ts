/**
 * A response body changed on its way, on the relay's pipeline (both wires): the agent's body,
 * without its HTTP/1.1 coding, goes through the policy's transforms (response-body-find-replace's
 * or sse-find-replace's rewrite, then compress-response's encoder), and what comes out goes to
 * the client: chunked on HTTP/1.1, as bytes until the connection closes on HTTP/1.0, as DATA
 * frames on HTTP/2. Back-pressure holds on both sides: a full transform pauses the tunnel stream,
 * a full client pauses the transforms.
 */
import type { Transform } from 'node:stream';
import { createBrotliCompress, createDeflate, createGzip } from 'node:zlib';
import type { BodyRewrite, CompressionEncoding } from '../../../policy/index.js';
import { bodyReplacer, sseReplacer } from './body-rewrite.js';

/** What a response phase that leaves the body alone (nearly every one) asks for; never changed. */
const NO_TRANSFORMS: readonly Transform[] = [];

/**
 * The transforms on_http_response asked for, in the order they apply: a find-replace's rewrite,
 * then compress-response's encoder. Asked once per response: with neither, nothing is allocated.
 * @example responseTransforms({ bodyRewrite: undefined, compress: 'gzip' }) // [Gzip]
 */
export function responseTransforms(d: {
  bodyRewrite?: BodyRewrite | undefined;
  compress?: CompressionEncoding | undefined;
}): readonly Transform[] {
  if (!d.bodyRewrite && !d.compress) return NO_TRANSFORMS;
  const transforms: Transform[] = [];
  if (d.bodyRewrite) transforms.push(rewriter(d.bodyRewrite));
  if (d.compress) transforms.push(compressor(d.compress));
  return transforms;
}

/**
 * The transform a find-replace action asked for: the whole text, or event by event.
 * @example req.pipe(rewriter(rewrite)).pipe(upstream)
 */
export function rewriter(rewrite: BodyRewrite): Transform {
  return rewrite.kind === 'sse'
    ? sseReplacer(rewrite.replacements)
    : bodyReplacer(rewrite.replacements);
}

/** The encoder compress-response chose. */
function compressor(encoding: CompressionEncoding): Transform {
  if (encoding === 'br') return createBrotliCompress();
  return encoding === 'gzip' ? createGzip() : createDeflate();
}

/** Where the changed body goes: the public socket, or an HTTP/2 stream. */
export interface BodySink {
  write(bytes: Buffer | string, encoding?: BufferEncoding): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/** What the body comes from: paused while the transforms are full. */
export interface BodySource {
  pause(): unknown;
  resume(): unknown;
}

/**
 * @example
 * const body = new BodyTransforms(responseTransforms(d), socket, true, stream, () => socket.destroy());
 * body.write(bodyBytes); body.end(() => nextRequest());
 */
export class BodyTransforms {
  private readonly first: Transform;
  private readonly last: Transform;
  private sourcePaused = false;

  constructor(
    private readonly transforms: readonly Transform[],
    private readonly sink: BodySink,
    /** Frame the output as HTTP/1.1 chunks (and end it with the last chunk). */
    private readonly chunked: boolean,
    private readonly source: BodySource,
    /** A transform failed: the client must see its response broken. */
    onError: () => void,
  ) {
    this.first = transforms[0]!;
    this.last = transforms[transforms.length - 1]!;
    for (let i = 1; i < transforms.length; i++) transforms[i - 1]!.pipe(transforms[i]!);
    for (const t of transforms) t.once('error', onError);
    this.last.on('data', this.onOutput);
  }

  /** Body bytes (decoded) for the transforms. */
  write(bytes: Buffer): void {
    if (this.first.write(bytes) || this.sourcePaused) return;
    this.sourcePaused = true;
    this.source.pause();
    this.first.once('drain', this.resumeSource);
  }

  /** The body is complete: `done` once the last bytes went to the client. */
  end(done: () => void): void {
    // A writable that is ending never says 'drain': the source, done, reads on (its next exchange).
    if (this.sourcePaused) {
      this.first.off('drain', this.resumeSource);
      this.resumeSource();
    }
    this.last.once('end', () => {
      if (this.chunked) this.sink.write('0\r\n\r\n', 'latin1');
      done();
    });
    this.first.end();
  }

  /** The exchange ended early (the client or the agent left). */
  destroy(): void {
    for (const t of this.transforms) t.destroy();
  }

  private readonly resumeSource = (): void => {
    this.sourcePaused = false;
    this.source.resume();
  };

  private readonly onOutput = (out: Buffer | string): void => {
    const sink = this.sink;
    const bytes = typeof out === 'string' ? Buffer.from(out) : out;
    if (bytes.length === 0) return;
    let ok: boolean;
    if (this.chunked) {
      sink.write(`${bytes.length.toString(16)}\r\n`, 'latin1');
      sink.write(bytes);
      ok = sink.write('\r\n', 'latin1');
    } else {
      ok = sink.write(bytes);
    }
    if (ok) return;
    this.last.pause();
    sink.once('drain', () => this.last.resume());
  };
}
