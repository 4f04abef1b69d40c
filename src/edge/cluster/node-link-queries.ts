/**
 * Queries on node links: a stream that opens with {"query": {...}} (node-link-wire.ts) gets one
 * reply and is closed, both ways. A reply is a 4-byte big-endian length and that many bytes of
 * UTF-8 JSON, {"ok": true, "value": …} or {"error": {"code", "message", "status"}}, at most
 * MAX_REPLY_BYTES: a node that would say more answers with an error instead, so one node can
 * never make another read without bound.
 */
import type { Readable } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { readPrefix, type PrefixParse } from '../../protocol/tunnel/reader.js';
import type { MuxStream } from '../../protocol/muxado/stream.js';
import type { StreamPeer } from './node-link-streams.js';
import {
  encodeMessage,
  errorAnswer,
  parseAnswer,
  withDeadline,
  type NodeQuery,
} from './node-link-wire.js';

export type { NodeQuery } from './node-link-wire.js';

/** Largest reply: a page of the inspector's list, or one record with its two 64 KiB bodies. */
export const MAX_REPLY_BYTES = 4 * 1024 * 1024;

/** Answers a peer's query on this node; rejects (ideally with a BurrowError) to answer an error. */
export type QueryHandler = (query: NodeQuery, peerId: string) => Promise<unknown>;

function encodeReply(value: unknown): Buffer {
  const body = Buffer.from(JSON.stringify({ ok: true, value }), 'utf8');
  if (body.length > MAX_REPLY_BYTES) {
    return encodeMessage(
      errorAnswer(
        new BurrowError(
          CODES.nodeLinkProtocol,
          502,
          `the reply of ${body.length} bytes is over the ${MAX_REPLY_BYTES}-byte limit of node link replies`,
        ),
      ),
    );
  }
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length, 0);
  return Buffer.concat([header, body]);
}

function parseReplyPrefix(head: Buffer): PrefixParse<Buffer> {
  if (head.length < 4) return { need: 4 };
  const length = head.readUInt32BE(0);
  if (length > MAX_REPLY_BYTES) {
    throw new BurrowError(
      CODES.nodeLinkProtocol,
      502,
      `a reply of ${length} bytes; the limit is ${MAX_REPLY_BYTES}`,
    );
  }
  const end = 4 + length;
  return head.length < end ? { need: end } : { value: head.subarray(4, end), used: end };
}

function readReply(stream: Readable): Promise<Buffer> {
  return readPrefix(stream, 'a node link reply', parseReplyPrefix);
}

/**
 * The value of a reply body; the peer's own error (code, status) when it answered one.
 * @example parseReply(Buffer.from('{"ok":true,"value":1}')) // 1
 */
export function parseReply(body: Buffer, peer: StreamPeer): unknown {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new BurrowError(CODES.nodeLinkProtocol, 502, `node ${peer.id}: the reply is not JSON`);
  }
  if (typeof value === 'object' && value !== null && 'value' in value) {
    if ((value as { ok?: unknown }).ok === true) return value.value;
  }
  // Not ok: the shape of a tunnel request's error answer, checked the same way.
  const answer = parseAnswer(body);
  if ('error' in answer) {
    const { code, message, status } = answer.error;
    throw new BurrowError(code, status ?? 502, message, { node: peer.id });
  }
  throw new BurrowError(CODES.nodeLinkProtocol, 502, `node ${peer.id}: the reply has no value`);
}

/**
 * Send `query` on a fresh `stream` and read the reply, within `timeoutMs`. Rejects with the
 * peer's error, ERR_BURROW_NODE_CONNECT_TIMEOUT, ERR_BURROW_NODE_LINK_PROTOCOL or
 * ERR_BURROW_NODE_UNREACHABLE; the stream is closed either way.
 * @example const value = await askQuery(session.openStream(), peer, { kind: 'traffic.list' }, 2000);
 */
export async function askQuery(
  stream: MuxStream,
  peer: StreamPeer,
  query: NodeQuery,
  timeoutMs: number,
): Promise<unknown> {
  const swallow = (): void => undefined; // readReply reports it
  stream.on('error', swallow);
  stream.end(encodeMessage({ query }));
  let body: Buffer;
  try {
    body = await withDeadline(
      readReply(stream),
      timeoutMs,
      () =>
        new BurrowError(
          CODES.nodeConnectTimeout,
          504,
          `node ${peer.id} at ${peer.address}: no reply within ${timeoutMs} ms`,
          { node: peer.id },
        ),
    );
  } catch (err) {
    stream.destroy();
    if (err instanceof BurrowError) throw err;
    throw new BurrowError(
      CODES.nodeUnreachable,
      502,
      `node ${peer.id} at ${peer.address}: the query stream failed (${(err as Error).message})`,
      { node: peer.id },
    );
  }
  // The peer ended its side after the reply; reading on lets the stream finish and be freed.
  stream.resume();
  return parseReply(body, peer);
}

/**
 * Answer `query` from `peerId` on `stream` with `handler` (an error reply when there is none or
 * it fails), then close the stream. Never rejects.
 * @example await answerQuery(stream, 'edge-b', query, handler, logger);
 */
export async function answerQuery(
  stream: MuxStream,
  peerId: string,
  query: NodeQuery,
  handler: QueryHandler | undefined,
  logger: Logger,
): Promise<void> {
  let reply: Buffer;
  try {
    if (!handler) {
      throw new BurrowError(
        CODES.nodeLinkProtocol,
        501,
        'this node answers no queries; run the same Burrow version on every node',
      );
    }
    reply = encodeReply(await handler(query, peerId));
  } catch (err) {
    logger.debug({ peer: peerId, kind: query.kind, err: (err as Error).message }, 'query failed');
    reply = encodeMessage(errorAnswer(err));
  }
  if (!stream.destroyed) stream.end(reply);
}
