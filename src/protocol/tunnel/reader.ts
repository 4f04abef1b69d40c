import type { Readable } from 'node:stream';
import { JsonObjectScanner } from './json-scanner.js';

/**
 * Reading helpers for stream prefixes (stream type, ProxyHeader, RPC JSON). They consume exactly
 * what they need and put any further bytes back with unshift(), so the caller can go on reading
 * or piping the rest. They leave the stream paused.
 */

type Step<T> = (finish: (value: T) => void) => void;

function readWith<T>(
  stream: Readable,
  what: string,
  step: Step<T>,
  timeoutMs?: number,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const cleanup = (): void => {
      settled = true;
      if (timer) clearTimeout(timer);
      stream.removeListener('readable', onReadable);
      stream.removeListener('end', onEnd);
      stream.removeListener('error', onError);
      stream.removeListener('close', onEnd);
    };
    const finish = (value: T): void => {
      cleanup();
      resolve(value);
    };
    const fail = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onReadable = (): void => {
      try {
        step(finish);
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
      }
    };
    const onEnd = (): void => {
      if (!settled) fail(new Error(`stream ended before ${what}`));
    };
    const onError = (err: Error): void => fail(err);
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => fail(new Error(`timed out waiting for ${what}`)), timeoutMs);
      timer.unref();
    }
    stream.on('readable', onReadable);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onEnd);
    onReadable();
    // Already over: no event will come.
    if (!settled && (stream.destroyed || stream.readableEnded)) onEnd();
  });
}

/**
 * Read exactly `n` bytes (fails if the stream ends first).
 * @example const type = (await readExactly(stream, 4)).readUInt32BE(0);
 */
export function readExactly(stream: Readable, n: number, timeoutMs?: number): Promise<Buffer> {
  if (n === 0) return Promise.resolve(Buffer.alloc(0));
  return readWith(
    stream,
    `${n} bytes`,
    (finish) => {
      const buf = stream.read(n) as Buffer | null;
      if (buf === null) return;
      if (buf.length < n) throw new Error(`stream ended after ${buf.length} of ${n} bytes`);
      finish(buf);
    },
    timeoutMs,
  );
}

/**
 * Read one JSON object from the stream without waiting for EOF, and parse it.
 * @example const request = await readJsonObject(stream);
 */
export function readJsonObject(
  stream: Readable,
  options: { maxBytes?: number; timeoutMs?: number } = {},
): Promise<unknown> {
  const scanner = new JsonObjectScanner(options.maxBytes);
  const parts: Buffer[] = [];
  return readWith(
    stream,
    'a JSON object',
    (finish) => {
      let chunk: Buffer | null;
      while ((chunk = stream.read() as Buffer | null) !== null) {
        const end = scanner.push(chunk);
        if (end < 0) {
          parts.push(chunk);
          continue;
        }
        parts.push(chunk.subarray(0, end));
        if (end < chunk.length) stream.unshift(chunk.subarray(end));
        const text = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).toString('utf8');
        finish(JSON.parse(text) as unknown);
        return;
      }
    },
    options.timeoutMs,
  );
}
