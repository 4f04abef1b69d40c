/**
 * Just enough WebSocket (RFC 6455) for tests: the handshake accept value, single, unfragmented
 * frames of up to 64 KiB and a client (handshake, then message for message), so upgrades can be
 * checked end to end with real bytes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

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

/** The answer to a WebSocket handshake: 101 with the upgraded socket, or an HTTP response. */
export type WebsocketReply =
  | { status: 101; headers: IncomingMessage['headers']; socket: Socket; head: Buffer }
  | { status: number; headers: IncomingMessage['headers']; body: string };

/**
 * A WebSocket handshake to 127.0.0.1:`port` with a Host header (Node cannot resolve test names):
 * the 101 and its socket (its Sec-WebSocket-Accept checked), or the HTTP answer and its body.
 * @example const reply = await websocketUpgrade(ingressPort, 'app.burrow.test', '/ws');
 */
export function websocketUpgrade(port: number, host: string, path = '/'): Promise<WebsocketReply> {
  const key = randomBytes(16).toString('base64');
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      agent: false,
      headers: {
        Host: host,
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Key': key,
        'Sec-WebSocket-Version': '13',
      },
    });
    req.on('upgrade', (res: IncomingMessage, socket: Socket, head: Buffer) => {
      const accept = res.headers['sec-websocket-accept'];
      if (accept !== websocketAccept(key)) {
        socket.destroy();
        reject(new Error(`wrong Sec-WebSocket-Accept: ${String(accept)}`));
        return;
      }
      resolve({ status: 101, headers: res.headers, socket, head });
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Send `messages` one at a time over an upgraded socket, each waiting for the peer's answer
 * frame; the answers, in order. Fails when the socket closes first.
 * @example expect(await websocketExchange(reply, ['hi'])).toEqual(['HI']);
 */
export async function websocketExchange(
  reply: WebsocketReply,
  messages: readonly string[],
): Promise<string[]> {
  if (!('socket' in reply)) throw new Error(`no upgrade: ${reply.status} ${reply.body}`);
  const { socket } = reply;
  let buf = Buffer.from(reply.head);
  let wake: (() => void) | undefined;
  let closed = false;
  const onData = (chunk: Buffer): void => {
    buf = Buffer.concat([buf, chunk]);
    wake?.();
  };
  const onClose = (): void => {
    closed = true;
    wake?.();
  };
  socket.on('data', onData);
  socket.once('close', onClose);
  const answers: string[] = [];
  try {
    for (const message of messages) {
      socket.write(websocketFrame(message, true));
      for (;;) {
        const frame = parseWebsocketFrame(buf);
        if (frame) {
          buf = buf.subarray(frame.length);
          answers.push(frame.text);
          break;
        }
        if (closed) throw new Error('the upgraded socket closed before an answer');
        await new Promise<void>((resolve) => (wake = resolve));
      }
    }
  } finally {
    socket.off('data', onData);
    socket.off('close', onClose);
  }
  return answers;
}
