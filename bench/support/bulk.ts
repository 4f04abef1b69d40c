/**
 * The local service the throughput benchmarks put behind a tunnel, and the clients that move bulk
 * data through it. One protocol for every benchmark:
 *
 * - HTTP: `GET /download?bytes=N` sends N bytes, `POST /upload` answers with the byte count it
 *   read, anything else answers `hello world\n` (12 bytes).
 * - TCP: `d<N>\n` sends N bytes and ends; `p` answers `pong` and ends; anything else counts what
 *   follows the first byte until the client's FIN and answers `ok <count>`.
 */
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import net from 'node:net';

export const MIB = 1024 * 1024;
const BLOCK = Buffer.alloc(256 * 1024, 0x61);

/**
 * Write `bytes` bytes to `out`, honouring back-pressure, then call `done`.
 * @example pumpBytes(socket, 10 * MIB, () => socket.end());
 */
export function pumpBytes(out: NodeJS.WritableStream, bytes: number, done: () => void): void {
  let left = bytes;
  const write = (): void => {
    while (left > 0) {
      const chunk = left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left);
      left -= chunk.length;
      if (!out.write(chunk)) return void out.once('drain', write);
    }
    done();
  };
  write();
}

function bulkHttpServer(): Server {
  const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/download') {
      const bytes = Number(url.searchParams.get('bytes'));
      res.writeHead(200, { 'Content-Length': bytes });
      pumpBytes(res, bytes, () => res.end());
    } else if (url.pathname === '/upload') {
      let bytes = 0;
      req.on('data', (c: Buffer) => (bytes += c.length));
      req.on('end', () => res.end(String(bytes)));
    } else {
      res.end('hello world\n');
    }
  });
  http.keepAliveTimeout = 60_000;
  return http;
}

function bulkTcpServer(): net.Server {
  return net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      if (first[0] === 0x70) return void socket.end('pong');
      if (first[0] === 0x64) {
        return pumpBytes(socket, Number(first.toString().slice(1).trim()), () => socket.end());
      }
      let got = first.length - 1;
      socket.on('data', (c: Buffer) => (got += c.length));
      socket.on('end', () => socket.end(`ok ${got}`));
    });
  });
}

export interface ServicePorts {
  http: number;
  tcp: number;
}

/**
 * Start the bulk service (HTTP and TCP) on loopback.
 * @example const { http, tcp } = await startBulkService();
 */
export async function startBulkService(): Promise<ServicePorts> {
  const http = bulkHttpServer();
  const tcp = bulkTcpServer();
  http.listen(0, '127.0.0.1');
  tcp.listen(0, '127.0.0.1');
  await Promise.all([once(http, 'listening'), once(tcp, 'listening')]);
  const port = (s: net.Server) => (s.address() as net.AddressInfo).port;
  return { http: port(http), tcp: port(tcp) };
}

/**
 * One TCP bulk transfer of `bytes` through `port`, checked to be complete; MiB/s.
 * 'up' sends to the service, 'down' has the service send.
 * @example const mibPerS = await tcpBulk(port, 'down', 256 * MIB);
 */
export async function tcpBulk(
  port: number,
  direction: 'up' | 'down',
  bytes: number,
): Promise<number> {
  const started = performance.now();
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true, noDelay: true });
  await once(socket, 'connect');
  let got = 0;
  let reply = '';
  const ended = new Promise<void>((resolve, reject) => {
    socket.on('data', (c: Buffer) => {
      got += c.length;
      if (direction === 'up') reply += c.toString();
    });
    socket.once('end', resolve);
    socket.once('error', reject);
  });
  if (direction === 'down') {
    socket.end(`d${bytes}\n`);
  } else {
    socket.write('u');
    await new Promise<void>((resolve) => pumpBytes(socket, bytes, resolve));
    socket.end();
  }
  await ended;
  socket.destroy();
  const complete = direction === 'down' ? got === bytes : reply === `ok ${bytes}`;
  if (!complete) throw new Error(`tcp ${direction}: incomplete (${got} bytes, '${reply}')`);
  return bytes / MIB / ((performance.now() - started) / 1000);
}

/** One TCP exchange on a new connection: `p`, expecting `pong`. */
export function tcpPing(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true, noDelay: true });
    let reply = '';
    socket.once('connect', () => socket.end('p'));
    socket.on('data', (c: Buffer) => (reply += c.toString()));
    socket.once('end', () => {
      socket.destroy();
      if (reply === 'pong') resolve();
      else reject(new Error(`got '${reply}'`));
    });
    socket.once('error', reject);
  });
}

/**
 * One HTTP request on a new connection to 127.0.0.1:`port` with `Host: host`; with `upload`,
 * a POST of that many bytes. Resolves with the bytes moved once the response has ended.
 * @example await httpCall(port, 'app.burrow.test', `/download?bytes=${MIB}`);
 */
export function httpCall(
  port: number,
  host: string,
  path: string,
  upload?: number,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: upload === undefined ? 'GET' : 'POST',
        agent: false,
        headers: { Host: host },
      },
      (res) => {
        let got = 0;
        res.on('data', (c: Buffer) => (got += c.length));
        res.on('end', () => resolve(upload ?? got));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (upload === undefined) return void req.end();
    req.setHeader('Content-Length', upload);
    pumpBytes(req, upload, () => req.end());
  });
}

/**
 * An HTTP download of `bytes` through `port`, checked to be complete; MiB/s.
 * @example await httpDownload(edge.httpPort, host, 64 * MIB);
 */
export async function httpDownload(port: number, host: string, bytes: number): Promise<number> {
  const started = performance.now();
  const got = await httpCall(port, host, `/download?bytes=${bytes}`);
  if (got !== bytes) throw new Error(`http download: got ${got} of ${bytes}`);
  return bytes / MIB / ((performance.now() - started) / 1000);
}
