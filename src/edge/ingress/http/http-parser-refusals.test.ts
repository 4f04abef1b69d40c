import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RefusalLog } from '../../listeners/connection-gate.js';
import { answerParserErrors } from './http-parser-refusals.js';
import { EdgeMetrics } from '../../metrics/metrics.js';

describe('answerParserErrors', () => {
  const metrics = new EdgeMetrics();
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer({ maxHeaderSize: 1024 }, (_req, res) => res.end('ok'));
    answerParserErrors(server, new RefusalLog(undefined, metrics));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => server.close());

  const raw = (text: string): Promise<string> =>
    new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
      let got = '';
      socket.setEncoding('utf8').on('data', (d: string) => (got += d));
      socket.on('close', () => resolve(got));
      socket.on('error', () => resolve(got));
    });

  it('answers headers over the limit with 431 and counts the refusal', async () => {
    const reply = await raw(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4000)}\r\n\r\n`);
    expect(reply).toMatch(/^HTTP\/1\.1 431 /);
    expect(metrics.limitRefusals.with({ limit: 'ingress_header_bytes' }).value).toBe(1);
  });

  it('answers malformed bytes with 400, which is not a limit', async () => {
    expect(await raw('NOT HTTP AT ALL\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    expect(metrics.limitRefusals.with({ limit: 'ingress_header_bytes' }).value).toBe(1);
  });
});
