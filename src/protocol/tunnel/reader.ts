import type { Readable } from 'node:stream';
import type { BudgetHold } from './byte-budget.js';
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
 * Gather chunks until `take` has its value: it sees each chunk once, returns undefined while it
 * needs more, then the value and the bytes of that chunk it did not use, which go back with
 * unshift().
 */
function readChunks<T>(
  stream: Readable,
  what: string,
  take: (chunk: Buffer) => { value: T; rest: Buffer } | undefined,
  timeoutMs?: number,
): Promise<T> {
  return readWith(
    stream,
    what,
    (finish) => {
      let chunk: Buffer | null;
      while ((chunk = stream.read() as Buffer | null) !== null) {
        const taken = take(chunk);
        if (!taken) continue;
        if (taken.rest.length > 0) stream.unshift(taken.rest);
        finish(taken.value);
        return;
      }
    },
    timeoutMs,
  );
}

/**
 * What a prefix parser makes of the bytes buffered so far: the value and how many bytes it took,
 * or how many bytes it needs in all before it can tell (more than it was given).
 */
export type PrefixParse<T> = { value: T; used: number } | { need: number };

/**
 * Read a prefix whose length the bytes themselves tell (a length field, then a body) in one step:
 * chunks are gathered until `parse`, given all of them as one buffer, has what it needs; the
 * bytes after what it used go back with unshift(). `parse` may throw to refuse the prefix (a
 * length out of range), and is called again only once the bytes it asked for have come.
 * @example const n = await readPrefix(stream, 'a length', (b) => (b.length < 4 ? { need: 4 } : { value: b.readUInt32BE(0), used: 4 }));
 */
export function readPrefix<T>(
  stream: Readable,
  what: string,
  parse: (head: Buffer) => PrefixParse<T>,
  timeoutMs?: number,
): Promise<T> {
  const parts: Buffer[] = [];
  let buffered = 0;
  let need = 1;
  return readChunks(
    stream,
    what,
    (chunk) => {
      parts.push(chunk);
      buffered += chunk.length;
      if (buffered < need) return undefined;
      const head = parts.length === 1 ? parts[0]! : Buffer.concat(parts, buffered);
      parts.splice(0, parts.length, head);
      const parsed = parse(head);
      if ('used' in parsed) return { value: parsed.value, rest: head.subarray(parsed.used) };
      // A parser that asks for no more than it has would be asked again for nothing.
      need = Math.max(parsed.need, buffered + 1);
      return undefined;
    },
    timeoutMs,
  );
}

/**
 * Read one JSON object from the stream without waiting for EOF, and parse it. With `budget`, every
 * chunk held while the object is incomplete is taken from it first (BudgetExceededError refuses
 * the read); the caller gives it back once done with the request.
 * @example const request = await readJsonObject(stream);
 */
export function readJsonObject(
  stream: Readable,
  options: { maxBytes?: number; timeoutMs?: number; budget?: BudgetHold | undefined } = {},
): Promise<unknown> {
  const scanner = new JsonObjectScanner(options.maxBytes);
  const parts: Buffer[] = [];
  return readChunks(
    stream,
    'a JSON object',
    (chunk) => {
      const end = scanner.push(chunk);
      if (end < 0) {
        options.budget?.take(chunk.length);
        parts.push(chunk);
        return undefined;
      }
      parts.push(chunk.subarray(0, end));
      const text = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).toString('utf8');
      return { value: JSON.parse(text) as unknown, rest: chunk.subarray(end) };
    },
    options.timeoutMs,
  );
}
