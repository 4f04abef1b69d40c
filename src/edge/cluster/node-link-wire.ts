/**
 * What travels on a node link besides muxado: the link's greeting, and at the start of each
 * stream one request (opener → acceptor) and one answer (acceptor → opener), each a 4-byte
 * big-endian length followed by that many bytes of UTF-8 JSON. After an ok answer the stream
 * carries the proxied connection's bytes, both ways.
 *
 * request: {"tunnelId": "tn_…", "info": {"clientAddr", "proto", "edgeType", "passthroughTls"}}
 *          (info may carry "serverAddr", for PROXY protocol headers)
 * answer:  {"ok": true}  or  {"error": {"code": "ERR_…", "message": "…", "status": 404}}
 *
 * A stream may instead open with a query, {"query": {"kind": "…", …}}: one question about the
 * peer's own state (its traffic inspector), answered once and closed (node-link-queries.ts).
 */
import type { Readable } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import { readPrefix, type PrefixParse } from '../../protocol/tunnel/reader.js';
import type { ProxyInfo } from '../registry/tunnel-registry.js';

/** ALPN of node links; also the greeting the accepting node sends once it accepted the peer. */
export const NODE_ALPN = 'burrow-node/1';
/**
 * The acceptor's first bytes on a link. In TLS 1.3 the dialer finishes its handshake before the
 * acceptor has checked the dialer's certificate; the greeting tells the dialer it was accepted.
 */
export const LINK_GREETING = Buffer.from(`${NODE_ALPN}\n`);

/** Largest request or answer body. */
const MAX_MESSAGE_BYTES = 16 * 1024;
/** Error messages relayed to the opener are cut to this many characters. */
const MAX_ERROR_MESSAGE = 1000;

/** One proxied connection a node asks a peer for: its tunnel, and the ProxyHeader fields. */
export interface NodeLinkRequest {
  tunnelId: string;
  info: ProxyInfo;
}

/** A question to a peer (node-link-queries.ts); `kind` picks who answers it there. */
export interface NodeQuery {
  kind: string;
  [field: string]: unknown;
}

/** The acceptor's answer to a request. */
export type NodeLinkAnswer =
  { ok: true } | { error: { code: string; message: string; status?: number | undefined } };

const EDGE_TYPES: ReadonlySet<string> = new Set(['', '1', '2', '3']);
const ERROR_CODE_RE = /^ERR_[A-Z0-9_]{1,80}$/;

/** A malformed request or answer. */
function nodeProtocolError(message: string): BurrowError {
  return new BurrowError(CODES.nodeLinkProtocol, 502, message);
}

/**
 * `value` as JSON behind its 4-byte big-endian length.
 * @example stream.write(encodeMessage({ ok: true }))
 */
export function encodeMessage(
  value: NodeLinkRequest | NodeLinkAnswer | { query: NodeQuery },
): Buffer {
  const body = Buffer.from(JSON.stringify(value), 'utf8');
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length, 0);
  return Buffer.concat([header, body]);
}

/** The ok answer, encoded once: every relayed connection starts with it. */
export const OK_ANSWER: Buffer = encodeMessage({ ok: true });

/**
 * One length-prefixed message body, at most MAX_MESSAGE_BYTES; bytes after it stay in the stream
 * for whoever reads next. Fails on a longer length (without reading the body) or an early end.
 * @example const body = await readMessage(stream);
 */
export function readMessage(stream: Readable): Promise<Buffer> {
  return readPrefix(stream, 'a node link message', parseMessage);
}

/** Length and body in one read step (a stream's request or answer usually comes in one chunk). */
function parseMessage(head: Buffer): PrefixParse<Buffer> {
  if (head.length < 4) return { need: 4 };
  const length = head.readUInt32BE(0);
  if (length > MAX_MESSAGE_BYTES) {
    throw nodeProtocolError(`a message of ${length} bytes; the limit is ${MAX_MESSAGE_BYTES}`);
  }
  const end = 4 + length;
  return head.length < end ? { need: end } : { value: head.subarray(4, end), used: end };
}

/**
 * `work`, or `timeoutError()` once `ms` passed first. `work` stays observed: a late rejection
 * is not reported as unhandled.
 * @example await withDeadline(readMessage(stream), 10_000, () => new Error('too slow'))
 */
export function withDeadline<T>(
  work: Promise<T>,
  ms: number,
  timeoutError: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timeoutError()), ms);
    timer.unref();
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

function parseJsonObject(body: Buffer, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw nodeProtocolError(`the ${what} is not JSON`);
  }
  if (!isObject(value)) throw nodeProtocolError(`the ${what} is not a JSON object`);
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isShortString(value: unknown, max: number): value is string {
  return typeof value === 'string' && value.length <= max;
}

/**
 * A request body, checked field by field; unknown fields are dropped.
 * @example parseRequest(await readMessage(stream)).tunnelId
 */
export function parseRequest(body: Buffer): NodeLinkRequest {
  return tunnelRequest(parseJsonObject(body, 'request'));
}

/**
 * What a stream opens with: a tunnel request, or a query (an object with a short string `kind`).
 * @example const opening = parseOpening(await readMessage(stream)); if ('query' in opening) …
 */
export function parseOpening(body: Buffer): { tunnel: NodeLinkRequest } | { query: NodeQuery } {
  const value = parseJsonObject(body, 'request');
  if (value.query === undefined) return { tunnel: tunnelRequest(value) };
  const query = value.query;
  if (!isObject(query) || !isShortString(query.kind, 64) || query.kind === '') {
    throw nodeProtocolError('the query has no kind');
  }
  return { query: { ...query, kind: query.kind } };
}

function tunnelRequest(value: Record<string, unknown>): NodeLinkRequest {
  const { tunnelId, info } = value;
  if (!isShortString(tunnelId, 256) || tunnelId === '') {
    throw nodeProtocolError('the request has no tunnelId');
  }
  if (!isObject(info)) throw nodeProtocolError('the request has no info object');
  const { clientAddr, proto, edgeType, passthroughTls, serverAddr } = info;
  if (!isShortString(clientAddr, 256)) throw nodeProtocolError('info.clientAddr is not a string');
  if (!isShortString(proto, 16)) throw nodeProtocolError('info.proto is not a string');
  if (typeof edgeType !== 'string' || !EDGE_TYPES.has(edgeType)) {
    throw nodeProtocolError("info.edgeType is not one of '', '1', '2', '3'");
  }
  if (typeof passthroughTls !== 'boolean') {
    throw nodeProtocolError('info.passthroughTls is not a boolean');
  }
  // Optional (PROXY protocol headers); older nodes do not send it.
  if (serverAddr !== undefined && !isShortString(serverAddr, 256)) {
    throw nodeProtocolError('info.serverAddr is not a string');
  }
  return {
    tunnelId,
    info: {
      clientAddr,
      proto,
      edgeType: edgeType as ProxyInfo['edgeType'],
      passthroughTls,
      ...(serverAddr !== undefined ? { serverAddr } : {}),
    },
  };
}

/**
 * An answer body, checked.
 * @example parseAnswer(Buffer.from('{"ok":true}')) // { ok: true }
 */
export function parseAnswer(body: Buffer): NodeLinkAnswer {
  const value = parseJsonObject(body, 'answer');
  if (value.ok === true) return { ok: true };
  const error = value.error;
  if (isObject(error)) {
    const { code, message, status } = error;
    if (typeof code === 'string' && ERROR_CODE_RE.test(code) && typeof message === 'string') {
      const validStatus =
        typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 600;
      return {
        error: {
          code,
          message: message.slice(0, MAX_ERROR_MESSAGE),
          status: validStatus ? status : undefined,
        },
      };
    }
  }
  throw nodeProtocolError('the answer is neither ok nor an error with a code and a message');
}

/**
 * The error answer for a failed `open()`: its code when it is a BurrowError that has one, else
 * ERR_NGROK_3004 (the tunnel is there but could not be reached).
 * @example errorAnswer(new BurrowError(CODES.tunnelNotFound, 404, 'not here'))
 */
export function errorAnswer(err: unknown): NodeLinkAnswer {
  const message = (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_MESSAGE);
  if (err instanceof BurrowError && err.code !== undefined && ERROR_CODE_RE.test(err.code)) {
    return { error: { code: err.code, message, status: err.statusCode } };
  }
  return { error: { code: CODES.tunnelUnreachable, message, status: 502 } };
}
