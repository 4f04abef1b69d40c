import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import { REPLAY_HEADER, TrafficLog } from './traffic-log.js';
import { trafficInspector } from './traffic-replay.js';

const record = (log: TrafficLog, host: string) =>
  log.add(
    trafficRequest(host, {
      path: '/account',
      requestHeaders: [
        'Host',
        host,
        'Authorization',
        'Bearer secret',
        'Cookie',
        'sid=secret',
        'X-Api-Key',
        'secret',
        'Accept',
        'text/html',
      ],
      status: 200,
      durationMs: 1,
    }),
  );

/** Replay to a real HTTP server standing in for the ingress, which notes what it received. */
describe('traffic replay of redacted credentials', () => {
  const log = new TrafficLog({ redactHeaders: ['x-api-key'] });
  const received: IncomingHttpHeaders[] = [];
  let ingress: Server;
  let address: string;
  beforeAll(async () => {
    ingress = createServer((req, res) => {
      received.push(req.headers);
      res.end();
    });
    ingress.listen(0, '127.0.0.1');
    await once(ingress, 'listening');
    address = `127.0.0.1:${(ingress.address() as AddressInfo).port}`;
  });
  afterAll(() => ingress.close());

  it('sends redacted headers as absent, never as their placeholder, and says which', async () => {
    const original = record(log, 'a.test');
    const result = await trafficInspector(log, address).replay(original);
    expect(result).toEqual({
      status: 200,
      omittedHeaders: ['authorization', 'cookie', 'x-api-key'],
    });
    const sent = received.at(-1)!;
    expect(sent.authorization).toBeUndefined();
    expect(sent.cookie).toBeUndefined();
    expect(sent['x-api-key']).toBeUndefined();
    expect(JSON.stringify(sent)).not.toContain('redacted');
    expect(sent.accept).toBe('text/html');
    expect(sent[REPLAY_HEADER]).toBe(original.id);
  });

  it('sends them as recorded when the host showed credentials', async () => {
    log.setCredentialsShown('b.test', true);
    const result = await trafficInspector(log, address).replay(record(log, 'b.test'));
    expect(result.omittedHeaders).toEqual([]);
    const sent = received.at(-1)!;
    expect(sent.authorization).toBe('Bearer secret');
    expect(sent.cookie).toBe('sid=secret');
    expect(sent['x-api-key']).toBe('secret');
  });
});
