import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { curl } from '../../../../test/support/curl.js';
import { DOWNLOAD_BLOCK, MB } from '../../../../test/support/http-upstream.js';
import { useSharedIngress } from '../../../../test/support/shared-ingress.js';
import {
  parseWebsocketFrame,
  websocketAccept,
  websocketFrame,
} from '../../../../test/support/websocket.js';

const env = useSharedIngress();

describe('HTTP ingress streaming', () => {
  it('answers pipelined requests in order', async () => {
    const tunnel = env.httpTunnel('pipe.burrow.test');
    const socket = connect(env.ingress.httpPort, '127.0.0.1');
    await once(socket, 'connect');
    const head = (path: string) => `GET ${path} HTTP/1.1\r\nHost: pipe.burrow.test\r\n\r\n`;
    // The first answer is the slow one: order must come from the ingress, not from timing.
    socket.write(head('/slow?ms=300&tag=first') + head('/slow?ms=0&tag=second'));
    let received = '';
    socket.setEncoding('utf8');
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk: string) => {
        received += chunk;
        if (received.includes('second')) resolve();
      });
    });
    socket.destroy();
    const statuses = received.match(/HTTP\/1\.1 200 OK/g);
    expect(statuses).toHaveLength(2);
    expect(received.indexOf('first')).toBeGreaterThan(0);
    expect(received.indexOf('first')).toBeLessThan(received.indexOf('second'));
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('streams a 50 MB chunked upload from curl intact', async () => {
    const tunnel = env.httpTunnel('upload.burrow.test');
    const dir = mkdtempSync(join(tmpdir(), 'burrow-upload-'));
    const file = join(dir, 'body.bin');
    const body = randomBytes(50 * MB);
    writeFileSync(file, body);
    const reply = await curl([
      '--resolve',
      `upload.burrow.test:${env.ingress.httpPort}:127.0.0.1`,
      '-H',
      'Transfer-Encoding: chunked',
      '--data-binary',
      `@${file}`,
      `http://upload.burrow.test:${env.ingress.httpPort}/hash`,
    ]);
    rmSync(dir, { recursive: true, force: true });
    expect(reply.status).toBe(200);
    // curl prints the 100 Continue head too; the JSON follows the last head.
    const json = JSON.parse(reply.text.slice(reply.text.lastIndexOf('\r\n\r\n') + 4));
    expect(json).toMatchObject({
      sha256: createHash('sha256').update(body).digest('hex'),
      bytes: 50 * MB,
      te: 'chunked',
      // curl waits for 100 Continue on large uploads: it went through the tunnel and back.
      expect: '100-continue',
    });
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('streams a 100 MB download with back-pressure instead of buffering it', async () => {
    const tunnel = env.httpTunnel('download.burrow.test');
    const expected = createHash('sha256');
    for (let i = 0; i < (100 * MB) / DOWNLOAD_BLOCK.length; i++) expected.update(DOWNLOAD_BLOCK);
    const result = await new Promise<{ bytes: number; sha256: string; heldBack: number }>(
      (resolve, reject) => {
        const req = request(
          {
            port: env.ingress.httpPort,
            host: '127.0.0.1',
            path: '/download?mb=100',
            headers: { Host: 'download.burrow.test' },
          },
          (res) => {
            // A client that stops reading: only socket buffers may fill, not the ingress's memory.
            res.pause();
            setTimeout(() => {
              const heldBack = env.upstream.downloadWritten;
              const hash = createHash('sha256');
              let bytes = 0;
              res.on('data', (c: Buffer) => {
                hash.update(c);
                bytes += c.length;
              });
              res.on('end', () => resolve({ bytes, sha256: hash.digest('hex'), heldBack }));
              res.resume();
            }, 500);
          },
        );
        req.on('error', reject);
        req.end();
      },
    );
    expect(result.heldBack).toBeLessThan(24 * MB);
    expect(result.bytes).toBe(100 * MB);
    expect(result.sha256).toBe(expected.digest('hex'));
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('upgrades to WebSocket and relays frames both ways', async () => {
    const tunnel = env.httpTunnel('ws.burrow.test');
    const key = randomBytes(16).toString('base64');
    const req = request({
      port: env.ingress.httpPort,
      host: '127.0.0.1',
      path: '/socket',
      headers: {
        Host: 'ws.burrow.test',
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Key': key,
        'Sec-WebSocket-Version': '13',
      },
    });
    req.end();
    const [res, socket, head] = (await once(req, 'upgrade')) as [IncomingMessage, Socket, Buffer];
    expect(res.statusCode).toBe(101);
    expect(res.headers['sec-websocket-accept']).toBe(websocketAccept(key));
    expect(res.headers['x-seen-forwarded-for']).toBe('127.0.0.1');
    let buf = Buffer.from(head);
    socket.write(websocketFrame('hello through the tunnel', true));
    const text = await new Promise<string>((resolve) => {
      const check = (): void => {
        const frame = parseWebsocketFrame(buf);
        if (frame) resolve(frame.text);
      };
      socket.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        check();
      });
      check();
    });
    expect(text).toBe('HELLO THROUGH THE TUNNEL');
    socket.destroy();
    env.ingress.registry.removeTunnel(tunnel.id);
  });
});
