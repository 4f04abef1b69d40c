import { once } from 'node:events';
import http, { type IncomingMessage } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { bodyReader, POLICY_BODY_LIMIT } from './http-policy-body.js';

/** A server whose handler reads each request body with bodyReader; resolves with what happened. */
async function serverReading(timeoutMs: number) {
  const outcomes: Promise<string>[] = [];
  const server = http.createServer((req: IncomingMessage, res) => {
    const read = bodyReader(req, { body: undefined }, timeoutMs)();
    outcomes.push(
      read.then(
        (body) => {
          res.end('ok');
          return `read ${body.length}`;
        },
        (err: Error) => {
          if (!res.destroyed) res.writeHead(413).end();
          return err.message;
        },
      ),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, outcomes };
}
const servers: http.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

describe('bodyReader (bodies a policy action reads whole)', () => {
  it('gives up on a client that stalls mid-body and closes its connection', async () => {
    const { port, outcomes } = await serverReading(300);
    const client = net.connect(port, '127.0.0.1');
    client.on('error', () => {});
    client.resume(); // read what comes, so the close can be seen
    client.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nonly part');
    await once(client, 'close');
    expect(await outcomes[0]).toMatch(/took longer than 0.3 s/);
  });

  it('reads a complete body, and refuses one over the limit', async () => {
    const { port, outcomes } = await serverReading(5000);
    const post = (size: number) =>
      fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: Buffer.alloc(size, 1) }).then(
        (r) => r.status,
        () => 0,
      );
    expect(await post(1000)).toBe(200);
    expect(await outcomes[0]).toBe('read 1000');
    await post(POLICY_BODY_LIMIT + 1);
    expect(await outcomes[1]).toMatch(/over 10485760 bytes/);
  });
});
