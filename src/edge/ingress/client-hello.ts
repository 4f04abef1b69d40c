/**
 * Reads the server name (SNI) out of the first bytes of a TLS connection without terminating it,
 * so the HTTPS port can pass whole TLS connections through to the agent by name.
 */

/** A ClientHello larger than this is refused (real ones, post-quantum key shares included, are < 8 KiB). */
export const MAX_CLIENT_HELLO_BYTES = 32 * 1024;

const RECORD_HEADER = 5;
const CONTENT_HANDSHAKE = 0x16;
const HANDSHAKE_CLIENT_HELLO = 0x01;
/** Records a ClientHello may be split into before we give up on it. */
const MAX_CLIENT_HELLO_RECORDS = 16;
const EXTENSION_SERVER_NAME = 0x0000;
const NAME_TYPE_HOST = 0x00;

/**
 * A fatal TLS `internal_error` alert record, for refusing a connection whose ClientHello was read
 * but whose handshake will not happen here: the client reports a TLS error, not a silent reset.
 * @example socket.end(TLS_INTERNAL_ERROR_ALERT);
 */
export const TLS_INTERNAL_ERROR_ALERT: Readonly<Buffer> = Buffer.from([
  0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50,
]);

export type ClientHelloScan =
  /** More bytes are needed. */
  | { kind: 'incomplete' }
  /** A complete ClientHello; `serverName` is undefined when the client sent no SNI. */
  | { kind: 'hello'; serverName: string | undefined }
  /** The first byte is not a TLS handshake record (for example, plain HTTP). */
  | { kind: 'not-tls' }
  /** TLS, but not a well-formed ClientHello. */
  | { kind: 'invalid'; reason: string };

class Truncated extends Error {}

/** A bounds-checked reader over one handshake message body. */
class Reader {
  constructor(
    private readonly buf: Buffer,
    public pos: number,
    private readonly end: number,
  ) {}
  get remaining(): number {
    return this.end - this.pos;
  }
  u8(): number {
    if (this.pos + 1 > this.end) throw new Truncated();
    return this.buf[this.pos++]!;
  }
  u16(): number {
    if (this.pos + 2 > this.end) throw new Truncated();
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  /** A sub-reader over the next `length` bytes, which are skipped here. */
  take(length: number): Reader {
    if (this.pos + length > this.end) throw new Truncated();
    const sub = new Reader(this.buf, this.pos, this.pos + length);
    this.pos += length;
    return sub;
  }
  ascii(): string {
    return this.buf.toString('latin1', this.pos, this.end);
  }
}

/** Server names are DNS names: printable ASCII only, or the connection is treated as malformed. */
const SERVER_NAME_RE = /^[\x21-\x7e]{1,253}$/;

function parseHelloBody(body: Buffer): ClientHelloScan {
  try {
    const r = new Reader(body, 0, body.length);
    r.take(2 + 32); // legacy_version, random
    r.take(r.u8()); // legacy_session_id
    r.take(r.u16()); // cipher_suites
    r.take(r.u8()); // legacy_compression_methods
    if (r.remaining === 0) return { kind: 'hello', serverName: undefined };
    const extensions = r.take(r.u16());
    while (extensions.remaining > 0) {
      const type = extensions.u16();
      const data = extensions.take(extensions.u16());
      if (type !== EXTENSION_SERVER_NAME) continue;
      const list = data.take(data.u16());
      while (list.remaining > 0) {
        const nameType = list.u8();
        const name = list.take(list.u16());
        if (nameType !== NAME_TYPE_HOST) continue;
        const serverName = name.ascii().toLowerCase();
        if (!SERVER_NAME_RE.test(serverName)) return { kind: 'invalid', reason: 'bad server name' };
        return { kind: 'hello', serverName };
      }
      return { kind: 'hello', serverName: undefined };
    }
    return { kind: 'hello', serverName: undefined };
  } catch (err) {
    if (err instanceof Truncated) return { kind: 'invalid', reason: 'truncated ClientHello' };
    throw err;
  }
}

/**
 * Look at the bytes a client sent so far. A ClientHello may span several TLS records; they are
 * reassembled. Call again with more bytes while the answer is `incomplete`.
 * @example
 * const scan = scanClientHello(buffered);
 * if (scan.kind === 'hello') route(scan.serverName);
 */
export function scanClientHello(buf: Buffer): ClientHelloScan {
  if (buf.length === 0) return { kind: 'incomplete' };
  if (buf[0] !== CONTENT_HANDSHAKE) return { kind: 'not-tls' };
  // Judge the handshake header as soon as it is here, before waiting for a record it announces.
  if (buf.length >= RECORD_HEADER + 4 && buf.readUInt16BE(3) >= 4) {
    if (buf[RECORD_HEADER] !== HANDSHAKE_CLIENT_HELLO) {
      return { kind: 'invalid', reason: 'first handshake message is not a ClientHello' };
    }
    if (buf.readUIntBE(RECORD_HEADER + 1, 3) + 4 > MAX_CLIENT_HELLO_BYTES) {
      return { kind: 'invalid', reason: 'ClientHello too large' };
    }
  }
  const fragments: Buffer[] = [];
  let handshakeBytes = 0;
  let helloLength: number | undefined;
  let offset = 0;
  while (offset + RECORD_HEADER <= buf.length) {
    if (buf[offset] !== CONTENT_HANDSHAKE) {
      return { kind: 'invalid', reason: 'ClientHello interrupted by another record type' };
    }
    const length = buf.readUInt16BE(offset + 3);
    if (length === 0) return { kind: 'invalid', reason: 'empty handshake record' };
    if (offset + RECORD_HEADER + length > buf.length) break;
    fragments.push(buf.subarray(offset + RECORD_HEADER, offset + RECORD_HEADER + length));
    // Real clients send one record, two at most; thousands of tiny ones only cost us CPU, since
    // the scan starts over at every read until the hello is whole.
    if (fragments.length > MAX_CLIENT_HELLO_RECORDS) {
      return { kind: 'invalid', reason: 'ClientHello split into too many records' };
    }
    handshakeBytes += length;
    offset += RECORD_HEADER + length;
    if (helloLength === undefined && handshakeBytes >= 4) {
      const head = fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments);
      if (head[0] !== HANDSHAKE_CLIENT_HELLO) {
        return { kind: 'invalid', reason: 'first handshake message is not a ClientHello' };
      }
      helloLength = head.readUIntBE(1, 3);
      if (helloLength + 4 > MAX_CLIENT_HELLO_BYTES) {
        return { kind: 'invalid', reason: 'ClientHello too large' };
      }
    }
    if (helloLength !== undefined && handshakeBytes >= helloLength + 4) {
      const handshake = fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments);
      return parseHelloBody(handshake.subarray(4, 4 + helloLength));
    }
  }
  if (buf.length > MAX_CLIENT_HELLO_BYTES + RECORD_HEADER * 8) {
    return { kind: 'invalid', reason: 'ClientHello too large' };
  }
  return { kind: 'incomplete' };
}

const EXTENSION_SUPPORTED_VERSIONS = 0x002b;
const TLS_VERSION_NAMES: Readonly<Record<number, string>> = {
  0x0301: 'TLSv1',
  0x0302: 'TLSv1.1',
  0x0303: 'TLSv1.2',
  0x0304: 'TLSv1.3',
};

/** The highest known version in a list of version codes; GREASE and unknown codes are skipped. */
function highestVersion(codes: readonly number[]): string | undefined {
  let best = 0;
  for (const code of codes) if (TLS_VERSION_NAMES[code] && code > best) best = code;
  return best === 0 ? undefined : TLS_VERSION_NAMES[best];
}

/**
 * The highest TLS version a complete ClientHello offers, in Node's spelling (`TLSv1.3`): from
 * its supported_versions extension (TLS 1.3 clients), else its legacy_version. This is what the
 * edge knows of a passed-through connection's version, since the handshake ends at the agent.
 * Undefined when `buf` is not a complete, well-formed ClientHello.
 * @example offeredTlsVersion(hello) // 'TLSv1.3', or 'TLSv1.2' for a client with maxVersion 1.2
 */
export function offeredTlsVersion(buf: Buffer): string | undefined {
  if (scanClientHello(buf).kind !== 'hello') return undefined;
  const fragments: Buffer[] = [];
  for (let offset = 0; offset + RECORD_HEADER <= buf.length;) {
    const length = buf.readUInt16BE(offset + 3);
    fragments.push(buf.subarray(offset + RECORD_HEADER, offset + RECORD_HEADER + length));
    offset += RECORD_HEADER + length;
  }
  const handshake = Buffer.concat(fragments);
  try {
    const r = new Reader(handshake, 4, 4 + handshake.readUIntBE(1, 3));
    const legacy = r.u16();
    r.take(32); // random
    r.take(r.u8()); // legacy_session_id
    r.take(r.u16()); // cipher_suites
    r.take(r.u8()); // legacy_compression_methods
    const extensions = r.remaining > 0 ? r.take(r.u16()) : undefined;
    while (extensions && extensions.remaining > 0) {
      const type = extensions.u16();
      const data = extensions.take(extensions.u16());
      if (type !== EXTENSION_SUPPORTED_VERSIONS) continue;
      const list = data.take(data.u8());
      const codes: number[] = [];
      while (list.remaining >= 2) codes.push(list.u16());
      return highestVersion(codes);
    }
    return highestVersion([legacy]);
  } catch (err) {
    if (err instanceof Truncated) return undefined;
    throw err;
  }
}
