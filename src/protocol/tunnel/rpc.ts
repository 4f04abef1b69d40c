import { BurrowError } from '../../core/errors.js';
import type { Readable } from 'node:stream';
import type * as M from './messages.js';
import { decodeMessage, type MessageName, type MessageTypes } from './messages.js';
import type { BudgetHold } from './byte-budget.js';
import { readJsonObject } from './reader.js';
import type { MuxSession } from '../muxado/session.js';
import type { MuxStream } from '../muxado/stream.js';
import { openTypedStream } from './typed.js';

/**
 * The RPC pattern (docs/protocol.md §5.2): the caller opens a typed stream and writes one JSON
 * object without half-closing; the responder writes one JSON object and then FINs. A non-empty
 * top-level `Error` in a reply means failure.
 */

/** Request and reply types by stream type. */
export interface RpcCalls {
  0: [M.Auth, M.AuthResp];
  1: [M.Bind, M.BindResp];
  2: [M.Unbind, M.UnbindResp];
  4: [M.Restart, M.RestartResp];
  5: [M.Stop, M.StopResp];
  6: [M.Update, M.UpdateResp];
  7: [M.StartTunnelWithLabel, M.StartTunnelWithLabelResp];
  8: [M.SrvInfo, M.SrvInfoResp];
  10: [M.PatchTunnelState, M.PatchTunnelStateResp];
}

const REPLY_NAMES: { [T in keyof RpcCalls]: MessageName } = {
  0: 'AuthResp',
  1: 'BindResp',
  2: 'UnbindResp',
  4: 'RestartResp',
  5: 'StopResp',
  6: 'UpdateResp',
  7: 'StartTunnelWithLabelResp',
  8: 'SrvInfoResp',
  10: 'PatchTunnelStateResp',
};

const CODE_RE = /ERR_NGROK_\d+/;

/**
 * A failed RPC: the reply's `Error` text, with the `ERR_NGROK_nnn` code (if any) split out the way
 * the SDKs do.
 * @example if (err instanceof RpcError && err.errorCode === 'ERR_NGROK_105') askForAToken();
 */
export class RpcError extends BurrowError {
  /** The `ERR_NGROK_nnn` code in the reply, as @ngrok/ngrok names it; the same as `code`. */
  readonly errorCode: string | undefined;

  constructor(text: string) {
    const lines = text.split('\n').map((line) => line.trim());
    const message = lines.filter((line) => line !== '' && !CODE_RE.test(line)).join('\n');
    const errorCode = CODE_RE.exec(text)?.[0];
    super(errorCode, 502, message || text);
    this.errorCode = errorCode;
  }
}

/**
 * The `Error` text for a failed reply: the code on its own line, which Go (regex) and Rust
 * (lines starting with ERR_NGROK_) both extract.
 * @example rpcErrorText('authentication failed', 'ERR_NGROK_105') // 'authentication failed\n\nERR_NGROK_105\n'
 */
export function rpcErrorText(message: string, code?: string): string {
  return code ? `${message}\n\n${code}\n` : message;
}

export interface ReadMessageOptions {
  /** Largest request accepted (default 1 MiB). */
  maxBytes?: number;
  timeoutMs?: number;
  /** What the bytes held while the request is incomplete are taken from (readJsonObject). */
  budget?: BudgetHold | undefined;
}

/**
 * Read one message from a stream without waiting for EOF (the caller keeps its side open), and
 * decode it case-insensitively when its name is given.
 * @example const auth = await readMessage(stream, 'Auth'); auth.Extra?.AuthToken
 */
export function readMessage<K extends MessageName>(
  stream: Readable,
  name: K,
  options?: ReadMessageOptions,
): Promise<MessageTypes[K]>;
export function readMessage(
  stream: Readable,
  name?: undefined,
  options?: ReadMessageOptions,
): Promise<Record<string, unknown>>;
export async function readMessage(
  stream: Readable,
  name?: MessageName,
  options: ReadMessageOptions = {},
): Promise<unknown> {
  const raw = await readJsonObject(stream, options);
  return name ? decodeMessage(name, raw) : raw;
}

/**
 * Write the reply and FIN (Rust/JS read replies to EOF), then discard whatever else the caller
 * sends so the stream can finish.
 * @example writeReply(stream, { Version: '3', ClientId: id, Extra: {} });
 */
export function writeReply(stream: MuxStream, reply: object): void {
  if (stream.destroyed) return;
  // Go's encoder ends each object with a newline; every client tolerates it.
  stream.end(JSON.stringify(reply) + '\n');
  stream.resume();
}

/**
 * Client side of an RPC: open a stream of `type`, send the request in its SYN frame, read the
 * reply, then half-close. Throws RpcError when the reply carries an Error.
 * @example const resp = await call(session, StreamType.Auth, { Version: ['3', '2'], ClientId: '', Extra });
 */
export async function call<T extends keyof RpcCalls>(
  session: MuxSession,
  type: T,
  request: RpcCalls[T][0],
  options: { timeoutMs?: number } = {},
): Promise<RpcCalls[T][1]> {
  const stream = openTypedStream(session, type, Buffer.from(JSON.stringify(request), 'utf8'));
  stream.on('error', () => {
    // Reported through the read below; later errors (after the reply) do not matter.
  });
  let reply: RpcCalls[T][1];
  try {
    const raw = await readJsonObject(stream, { timeoutMs: options.timeoutMs ?? 30_000 });
    reply = decodeMessage(REPLY_NAMES[type], raw) as RpcCalls[T][1];
  } catch (err) {
    stream.destroy();
    throw err;
  }
  stream.end();
  stream.resume();
  const error = (reply as { Error?: unknown }).Error;
  if (typeof error === 'string' && error !== '') throw new RpcError(error);
  return reply;
}

/**
 * Send a message that has no reply (StopTunnel): open, write, FIN.
 * @example notify(session, StreamType.StopTunnel, { Id: bindId, Message: 'tunnel removed', ErrorCode: 'ERR_NGROK_...' });
 */
export function notify(session: MuxSession, type: number, message: object): MuxStream {
  const stream = openTypedStream(session, type, Buffer.from(JSON.stringify(message), 'utf8'));
  stream.on('error', () => {});
  stream.end();
  stream.resume();
  return stream;
}
