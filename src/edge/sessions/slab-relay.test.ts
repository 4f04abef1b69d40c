/**
 * Bulk downloads through a real edge with both kinds of agent, several at once and one read
 * slowly: the edge reads its agent links into slabs and reads into a slab again once the relay
 * has written all of its bytes to the clients (slab-reads.ts SlabLender, MuxStream.release,
 * connection-stream.ts). Every byte must arrive as the service sent it, never bytes a later read
 * put in a reused slab.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, get, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSdkTestEdge, type SdkTestEdge } from '../../../test/support/sdk-edge.js';
import { connect, type Session } from '../../sdk/index.js';

const MB = 1024 * 1024;
/** The service's bytes: a download of `bytes` from `offset` cycles through them. */
const SOURCE = randomBytes(8 * MB + 13);

function expected(offset: number, bytes: number): string {
  const hash = createHash('sha256');
  for (let at = 0; at < bytes;) {
    const from = (offset + at) % SOURCE.length;
    const n = Math.min(bytes - at, SOURCE.length - from);
    hash.update(SOURCE.subarray(from, from + n));
    at += n;
  }
  return hash.digest('hex');
}

let service: Server;
let edge: SdkTestEdge;
let sdk: Session;
let sdkHost: string;
let ngrokHost: string;
let ngrokSession: ngrok.Session;

beforeAll(async () => {
  service = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const offset = Number(url.searchParams.get('offset'));
    const bytes = Number(url.searchParams.get('bytes'));
    res.writeHead(200, { 'Content-Length': bytes });
    let at = 0;
    const more = (): void => {
      while (at < bytes) {
        const from = (offset + at) % SOURCE.length;
        const n = Math.min(bytes - at, SOURCE.length - from, 256 * 1024);
        at += n;
        if (!res.write(SOURCE.subarray(from, from + n))) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  service.listen(0, '127.0.0.1');
  await once(service, 'listening');
  const port = (service.address() as AddressInfo).port;
  edge = await startSdkTestEdge('sqlite');
  sdk = await connect({
    serverAddr: edge.serverAddr,
    authtoken: await edge.token(),
    ca: edge.caFile,
  });
  const endpoint = await sdk.httpEndpoint({ scheme: 'http', forward: port });
  sdkHost = new URL(endpoint.url!).hostname;
  ngrokSession = await new ngrok.SessionBuilder()
    .serverAddr(edge.serverAddr)
    .caCert(readFileSync(edge.caFile))
    .authtoken(await edge.token())
    .connect();
  const listener = await ngrokSession
    .httpEndpoint()
    .scheme('HTTP')
    .listenAndForward(`http://127.0.0.1:${port}`);
  ngrokHost = new URL(listener.url()!).hostname;
}, 60_000);

afterAll(async () => {
  await ngrokSession?.close();
  await sdk?.close();
  await edge?.close();
  service?.close();
});

/** Download through the edge and hash what arrives; `slow` pauses the reader now and then. */
function download(host: string, offset: number, bytes: number, slow = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = get(
      {
        host: '127.0.0.1',
        port: edge.httpPort,
        path: `/data?offset=${offset}&bytes=${bytes}`,
        headers: { Host: host },
        agent: false,
      },
      (res) => {
        const hash = createHash('sha256');
        let got = 0;
        // Long enough pauses that the kernel's buffers fill and the edge holds data for it.
        let nextPause = 0;
        res.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          got += chunk.length;
          if (slow && got >= nextPause) {
            nextPause += MB / 2;
            res.pause();
            setTimeout(() => res.resume(), 100);
          }
        });
        res.on('end', () =>
          got === bytes ? resolve(hash.digest('hex')) : reject(new Error(`got ${got} of ${bytes}`)),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
}

describe('bulk downloads through reused slabs', () => {
  it.each([
    ['Burrow SDK', () => sdkHost],
    ['@ngrok/ngrok', () => ngrokHost],
  ])(
    'arrive intact with the %s agent, four at once and one read slowly',
    async (_agent, host) => {
      const reusedBefore = edge.listener.sessions().reduce((n, s) => n + s.mux.slabsReused, 0);
      const jobs = [
        { offset: 0, bytes: 24 * MB, slow: false },
        { offset: 1_000_003, bytes: 16 * MB + 7, slow: false },
        { offset: 5_123_457, bytes: 12 * MB, slow: true },
        { offset: 77, bytes: 12 * MB + 1, slow: false },
      ];
      const hashes = await Promise.all(
        jobs.map((job) => download(host(), job.offset, job.bytes, job.slow)),
      );
      expect(hashes).toEqual(jobs.map((job) => expected(job.offset, job.bytes)));
      const reused = edge.listener.sessions().reduce((n, s) => n + s.mux.slabsReused, 0);
      expect(reused).toBeGreaterThan(reusedBefore);
    },
    60_000,
  );
});
