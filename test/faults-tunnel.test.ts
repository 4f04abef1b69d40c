import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { startRelay, type Relay } from './support/sdk-edge.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  type EdgePorts,
} from './support/edge-listeners.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';

/** Size of the download the cut interrupts; the upstream sends it slowly so the cut lands inside. */
const DOWNLOAD_BYTES = 8 * 1024 * 1024;
const CHUNK_BYTES = 64 * 1024;

/** How a download through the public URL ended. */
interface DownloadEnd {
  status: number;
  received: number;
  /** True only when the whole body arrived as announced. */
  complete: boolean;
  error?: string;
  ms: number;
}

/**
 * GET `path` on the plain-HTTP ingress with `host`; `onProgress` sees the byte count as it grows.
 * Never waits longer than 15 s: a hang fails the test instead of stalling it.
 */
function download(
  port: number,
  host: string,
  path: string,
  onProgress: (received: number) => void = () => undefined,
): Promise<DownloadEnd> {
  const started = Date.now();
  return new Promise((resolve) => {
    let received = 0;
    let status = 0;
    let settled = false;
    const done = (end: Omit<DownloadEnd, 'ms' | 'received' | 'status'>) => {
      if (settled) return;
      settled = true;
      resolve({ status, received, ms: Date.now() - started, ...end });
    };
    const req = http.request(
      { host: '127.0.0.1', port, path, headers: { Host: host }, agent: false },
      (res) => {
        status = res.statusCode ?? 0;
        const expected = Number(res.headers['content-length'] ?? -1);
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          onProgress(received);
        });
        res.on('end', () =>
          done({ complete: res.complete && (expected < 0 || received === expected) }),
        );
        res.on('error', (err) => done({ complete: false, error: err.message }));
        res.on('close', () => done({ complete: res.complete && received === expected }));
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('download hung')));
    req.on('error', (err) => done({ complete: false, error: err.message }));
    req.end();
  });
}

/**
 * The agent's link to the server cut in the middle of a download through its tunnel: a real
 * `burrow server` process, the @ngrok/ngrok agent connected through a TCP relay that the test cuts.
 */
describe('agent link cut mid-download', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let web: LocalServer;
  let relay: Relay;
  let session: ngrok.Session | undefined;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    ports = await freeEdgePorts();
    server = await startBurrowServer(db, { args: edgeServerArgs(ports) });
    api = new CurlApi(server.url, await createApiKey(db));
    web = await startHttpUpstream((req, res) => {
      if (!req.url?.startsWith('/download')) return void res.end(`hello from ${req.url}`);
      // A slow, long body: 64 KiB every 20 ms, with its length announced up front.
      res.writeHead(200, { 'content-length': String(DOWNLOAD_BYTES) });
      let sent = 0;
      const timer = setInterval(() => {
        if (res.destroyed || sent >= DOWNLOAD_BYTES) return void clearInterval(timer);
        res.write(Buffer.alloc(CHUNK_BYTES, 0x61));
        sent += CHUNK_BYTES;
        if (sent >= DOWNLOAD_BYTES) res.end();
      }, 20);
      res.on('close', () => clearInterval(timer));
    });
    relay = await startRelay(`127.0.0.1:${ports.agent}`);
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await relay?.close();
    await web?.close();
    await server?.stop(20_000);
    await db?.drop();
  });

  it('gives the public client a clean error at once, and the agent comes back with the same URL', async () => {
    const caPem = readFileSync(join(db.dataDir, 'ca.pem'));
    session = await connectNgrok(relay.addr, caPem, await createAuthtoken(api));
    const listener = await session
      .httpEndpoint()
      .scheme('HTTP')
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    const url = listener.url()!;
    const host = new URL(url).host.replace(/:\d+$/, '');

    let cutAt = 0;
    let cutTime = 0;
    const end = await download(ports.http, host, '/download', (received) => {
      if (cutAt === 0 && received >= 512 * 1024) {
        cutAt = received;
        cutTime = Date.now();
        relay.cut();
      }
    });
    expect(cutAt).toBeGreaterThan(0);
    expect(end.status).toBe(200);
    // Clean: the client learns the body is short (connection closed before the announced length),
    // it is not handed a truncated body as if it were whole, and it does not hang.
    expect(end.complete).toBe(false);
    expect(end.received).toBeLessThan(DOWNLOAD_BYTES);
    expect(Date.now() - cutTime).toBeLessThan(3000);

    // The agent reconnects through the relay and gets its URL back.
    await until(() => relay.accepted >= 2, 15_000);
    let again: DownloadEnd | undefined;
    for (let i = 0; i < 100; i++) {
      again = await download(ports.http, host, '/again');
      if (again.status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(again).toMatchObject({ status: 200, complete: true });
    expect(listener.url()).toBe(url);
    const tunnels = (await api.get('/tunnels')).body.tunnels as { public_url?: string }[];
    expect(tunnels.map((t) => t.public_url)).toContain(url);
    // And a whole download works after the resume.
    const whole = await download(ports.http, host, '/download');
    expect(whole).toMatchObject({ status: 200, complete: true, received: DOWNLOAD_BYTES });
  }, 60_000);
});
