/**
 * One stream of a node link, from both ends: the opener sends its request and waits for the
 * answer (askPeer); the acceptor reads the request, opens the tunnel, answers and relays
 * (answerPeer). The messages are node-link-wire.ts's; a stream that opens with a query is answered
 * by node-link-queries.ts instead.
 */
import type { Duplex } from 'node:stream';
import { BurrowError, CODES } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { relay } from '../../core/relay.js';
import { ErrorCode } from '../../protocol/muxado/frame.js';
import type { MuxStream } from '../../protocol/muxado/stream.js';
import { answerQuery, type QueryHandler } from './node-link-queries.js';
import {
  encodeMessage,
  errorAnswer,
  OK_ANSWER,
  parseAnswer,
  parseOpening,
  readMessage,
  withDeadline,
  type NodeLinkAnswer,
  type NodeLinkRequest,
} from './node-link-wire.js';

/** The node a stream goes to, for errors. */
export interface StreamPeer {
  id: string;
  address: string;
}

/**
 * Send `request` on a fresh `stream` and wait up to `timeoutMs` for the answer. Resolves with
 * the stream, whose bytes from then on are the proxied connection's (whatever followed the answer
 * stays in it); rejects with the peer's own error, or ERR_BURROW_NODE_CONNECT_TIMEOUT,
 * ERR_BURROW_NODE_LINK_PROTOCOL or ERR_BURROW_NODE_UNREACHABLE, the stream destroyed.
 * @example const stream = await askPeer(session.openStream(), peer, request, 10_000);
 */
export async function askPeer(
  stream: MuxStream,
  peer: StreamPeer,
  request: NodeLinkRequest,
  timeoutMs: number,
): Promise<MuxStream> {
  const swallow = (): void => undefined; // readMessage reports it; the stream is destroyed
  stream.on('error', swallow);
  stream.write(encodeMessage(request));
  let answer: NodeLinkAnswer;
  try {
    const body = await withDeadline(readMessage(stream), timeoutMs, () =>
      nodeError(CODES.nodeConnectTimeout, peer, `no answer within ${timeoutMs} ms`),
    );
    answer = parseAnswer(body);
  } catch (err) {
    stream.destroy();
    if (err instanceof BurrowError && err.code === CODES.nodeConnectTimeout) throw err;
    if (err instanceof BurrowError && err.code === CODES.nodeLinkProtocol) {
      throw nodeError(CODES.nodeLinkProtocol, peer, err.message);
    }
    throw nodeUnreachable(peer, 'the stream failed', err);
  }
  if ('error' in answer) {
    stream.destroy();
    const { code, message, status } = answer.error;
    throw new BurrowError(code, status ?? 502, message, { node: peer.id });
  }
  stream.off('error', swallow);
  return stream;
}

/**
 * Serve a stream `peerId` opened: read its request (a malformed or missing one resets the stream
 * with Protocol), open the tunnel with `open`, answer, then relay until both sides are done; or,
 * when it opens with a query, reply with `answer`'s value and close. Never rejects.
 * @example session.on('stream', (stream) => void answerPeer(stream, 'edge-b', open, 10_000, logger));
 */
export async function answerPeer(
  stream: MuxStream,
  peerId: string,
  open: (request: NodeLinkRequest, peerId: string) => Promise<Duplex>,
  timeoutMs: number,
  logger: Logger,
  answer?: QueryHandler,
): Promise<void> {
  stream.on('error', (err: Error) =>
    logger.debug({ peer: peerId, err: err.message }, 'node link stream error'),
  );
  let request: NodeLinkRequest;
  try {
    const body = await withDeadline(readMessage(stream), timeoutMs, () => new Error('no request'));
    const opening = parseOpening(body);
    if ('query' in opening) {
      await answerQuery(stream, peerId, opening.query, answer, logger);
      return;
    }
    request = opening.tunnel;
  } catch (err) {
    const code = err instanceof BurrowError ? err.code : undefined;
    const message = err instanceof Error ? err.message : String(err);
    // A malformed request is worth a warning; a peer that gave up before asking is not.
    const level = code === CODES.nodeLinkProtocol ? 'warn' : 'debug';
    logger[level]({ peer: peerId, code, err: message }, 'bad node link request; stream reset');
    stream.reset(ErrorCode.Protocol);
    return;
  }
  let tunnel: Duplex;
  try {
    tunnel = await open(request, peerId);
  } catch (err) {
    if (!stream.destroyed) stream.end(encodeMessage(errorAnswer(err)));
    return;
  }
  if (stream.destroyed || !stream.writable) {
    // The opener gave up meanwhile: nobody will read the tunnel.
    tunnel.destroy();
    return;
  }
  stream.write(OK_ANSWER);
  relay(stream, tunnel);
}

/**
 * ERR_BURROW_NODE_UNREACHABLE for `peer`: `why`, or the cause's message, and the cause.
 * @example throw nodeUnreachable(peer, undefined, err) // cannot reach node edge-b at …: ECONNREFUSED …
 */
export function nodeUnreachable(
  peer: StreamPeer,
  why: string | undefined,
  cause?: unknown,
): BurrowError {
  const reason = why ?? (cause instanceof Error ? cause.message : String(cause));
  const detail = why !== undefined && cause instanceof Error ? ` (${cause.message})` : '';
  return new BurrowError(
    CODES.nodeUnreachable,
    502,
    `cannot reach node ${peer.id} at ${peer.address}: ${reason}${detail}`,
    { node: peer.id, address: peer.address },
    { cause },
  );
}

function nodeError(code: string, peer: StreamPeer, message: string): BurrowError {
  return new BurrowError(code, 502, `node ${peer.id} at ${peer.address}: ${message}`, {
    node: peer.id,
    address: peer.address,
  });
}
