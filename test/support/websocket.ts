/**
 * Just enough WebSocket (RFC 6455) for tests: the handshake accept value and single, unfragmented
 * frames of up to 64 KiB, so upgrades can be checked end to end with real bytes.
 */
import { createHash, randomBytes } from 'node:crypto';

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`. */
export function websocketAccept(key: string): string {
  return createHash('sha1')
    .update(key + WS_GUID)
    .digest('base64');
}

/** A final text frame; clients must mask, servers must not. */
export function websocketFrame(payload: string, masked: boolean): Buffer {
  const data = Buffer.from(payload);
  if (data.length > 0xffff) throw new RangeError('test frames are at most 64 KiB');
  const header: number[] = [0x81];
  const maskBit = masked ? 0x80 : 0;
  if (data.length < 126) header.push(maskBit | data.length);
  else header.push(maskBit | 126, data.length >> 8, data.length & 0xff);
  if (!masked) return Buffer.concat([Buffer.from(header), data]);
  const mask = randomBytes(4);
  const body = Buffer.from(data.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([Buffer.from(header), mask, body]);
}

/** The first complete frame in `buf` (its text and length), or undefined if more bytes are needed. */
export function parseWebsocketFrame(buf: Buffer): { text: string; length: number } | undefined {
  if (buf.length < 2) return undefined;
  const masked = (buf[1]! & 0x80) !== 0;
  let length = buf[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buf.length < 4) return undefined;
    length = buf.readUInt16BE(2);
    offset = 4;
  }
  const maskAt = offset;
  if (masked) offset += 4;
  if (buf.length < offset + length) return undefined;
  const body = Buffer.from(buf.subarray(offset, offset + length));
  if (masked) for (let i = 0; i < body.length; i++) body[i] = body[i]! ^ buf[maskAt + (i % 4)]!;
  return { text: body.toString(), length: offset + length };
}
