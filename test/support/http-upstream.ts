/**
 * The "local service" of the HTTP ingress tests: echoes requests, hashes uploads, streams
 * downloads while counting what it wrote, answers slowly or breaks on purpose, and echoes
 * WebSocket frames (upper-cased, to prove they went through it).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startHttpUpstream, type LocalServer } from './ingress.js';
import { parseWebsocketFrame, websocketAccept, websocketFrame } from './websocket.js';

export const MB = 1024 * 1024;
/** The download's repeating block; its hash over N blocks is what the client must see. */
export const DOWNLOAD_BLOCK = Buffer.alloc(64 * 1024, 0);
for (let i = 0; i < DOWNLOAD_BLOCK.length; i++) DOWNLOAD_BLOCK[i] = (i * 31 + 7) & 0xff;

/**
 * Routes: `/echo` (request as JSON, plus hop-by-hop response headers that must not get through),
 * `/hash` (sha256 of the body), `/download?mb=N`, `/slow?ms=N&tag=T`, `/not-modified`, `/cut`
 * (resets mid-body), anything else `ok`; upgrades echo WebSocket frames.
 */
export interface TestUpstream extends LocalServer {
  /** Bytes the service handed to its socket for the download in progress. */
  readonly downloadWritten: number;
}

/** @example const upstream = await startTestUpstream(); */
export async function startTestUpstream(): Promise<TestUpstream> {
  let downloadWritten = 0;
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/echo') {
      res.setHeader('X-Upstream', 'yes');
      res.setHeader('Connection', 'X-Secret');
      res.setHeader('X-Secret', 'hop-by-hop');
      const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers });
      res.setHeader('Content-Length', Buffer.byteLength(body));
      res.end(req.method === 'HEAD' ? undefined : body);
    } else if (url.pathname === '/hash') {
      const hash = createHash('sha256');
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        hash.update(c);
        bytes += c.length;
      });
      req.on('end', () => {
        const te = req.headers['transfer-encoding'] ?? null;
        res.end(
          JSON.stringify({ sha256: hash.digest('hex'), bytes, te, expect: req.headers.expect }),
        );
      });
    } else if (url.pathname === '/download') {
      const blocks = (Number(url.searchParams.get('mb')) * MB) / DOWNLOAD_BLOCK.length;
      res.writeHead(200, { 'Content-Length': blocks * DOWNLOAD_BLOCK.length });
      downloadWritten = 0;
      let sent = 0;
      const pump = (): void => {
        while (sent < blocks) {
          sent++;
          downloadWritten += DOWNLOAD_BLOCK.length;
          if (!res.write(DOWNLOAD_BLOCK)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    } else if (url.pathname === '/slow') {
      setTimeout(
        () => res.end(url.searchParams.get('tag') ?? ''),
        Number(url.searchParams.get('ms')),
      );
    } else if (url.pathname === '/not-modified') {
      res.writeHead(304, { ETag: '"v1"' });
      res.end();
    } else if (url.pathname === '/cut') {
      res.writeHead(200, { 'Content-Length': 1000 });
      res.write('only ten b');
      setTimeout(() => res.socket?.destroy(), 50);
    } else {
      res.end('ok');
    }
  };
  const server = await startHttpUpstream(handler, (http) => {
    http.on('upgrade', (req, socket) => {
      const key = String(req.headers['sec-websocket-key']);
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
          `Sec-WebSocket-Accept: ${websocketAccept(key)}\r\n` +
          `X-Seen-Forwarded-For: ${String(req.headers['x-forwarded-for'])}\r\n\r\n`,
      );
      let buf = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        const frame = parseWebsocketFrame(buf);
        if (!frame) return;
        buf = buf.subarray(frame.length);
        socket.write(websocketFrame(frame.text.toUpperCase(), false));
      });
    });
  });
  return {
    port: server.port,
    get accepted() {
      return server.accepted;
    },
    get open() {
      return server.open;
    },
    get downloadWritten() {
      return downloadWritten;
    },
    close: () => server.close(),
  };
}
