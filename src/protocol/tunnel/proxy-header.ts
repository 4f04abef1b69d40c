/**
 * Proxied connections (stream type 3): the ProxyHeader the server writes first on each, which
 * tells the agent which tunnel the connection is for and who the client is.
 */
import type { Readable } from 'node:stream';
import { decodeMessage, StreamType, type ProxyHeader } from './messages.js';
import { readPrefix, type PrefixParse } from './reader.js';
import type { MuxSession } from '../muxado/session.js';
import type { MuxStream } from '../muxado/stream.js';
import { openTypedStream } from './typed.js';
/** A ProxyHeader longer than this is refused (real ones are ~150 bytes). */
export const MAX_PROXY_HEADER = 64 * 1024;

/**
 * The bytes that follow the stream type on a proxy stream: int64 little-endian length (the only
 * little-endian field in the protocol), then the header JSON.
 * @example stream.write(encodeProxyHeader({ Id, ClientAddr, Proto: 'https', EdgeType: '', PassthroughTLS: false }))
 */
export function encodeProxyHeader(header: ProxyHeader): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const out = Buffer.allocUnsafe(8 + json.length);
  out.writeBigInt64LE(BigInt(json.length), 0);
  json.copy(out, 8);
  return out;
}

/**
 * Open a proxy stream (type 3): type, length and header travel together in the SYN frame; the
 * connection's bytes follow.
 * @example const stream = openProxyStream(session, header); publicSocket.pipe(stream).pipe(publicSocket);
 */
export function openProxyStream(session: MuxSession, header: ProxyHeader): MuxStream {
  return openTypedStream(session, StreamType.Proxy, encodeProxyHeader(header));
}

/**
 * Parse the length and JSON of a ProxyHeader at the start of `head`: the header and the bytes it
 * took, or how many bytes it needs in all. Throws RangeError for a length over MAX_PROXY_HEADER.
 * @example parseProxyHeader(encodeProxyHeader(header)) // { value: header, used: 8 + json length }
 */
export function parseProxyHeader(head: Buffer): PrefixParse<ProxyHeader> {
  if (head.length < 8) return { need: 8 };
  const length = head.readBigInt64LE(0);
  if (length < 0n || length > BigInt(MAX_PROXY_HEADER)) {
    throw new RangeError(`ProxyHeader length ${length} out of range`);
  }
  const used = 8 + Number(length);
  if (head.length < used) return { need: used };
  const json = JSON.parse(head.toString('utf8', 8, used)) as unknown;
  return { value: decodeMessage('ProxyHeader', json), used };
}

/**
 * Read the ProxyHeader of a proxy stream whose type has been read, in one step: it waits until
 * the length and the whole JSON are buffered; the connection's bytes stay in the stream, which is
 * left paused.
 * @example const header = await readProxyHeader(stream);
 */
export function readProxyHeader(stream: Readable, timeoutMs?: number): Promise<ProxyHeader> {
  return readPrefix(stream, 'the ProxyHeader', parseProxyHeader, timeoutMs);
}
