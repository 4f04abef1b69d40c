import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fakeTunnel,
  listenLocal,
  rawExchange,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';

/**
 * ACME HTTP-01 challenges are answered by the relay, before routing and policy, whatever serves
 * the name; the connection stays on the relay. The service sends no `Date` header, so a reply
 * without one was relayed.
 */
describe('ACME HTTP-01 challenges on the relay', () => {
  let t: TestIngress;
  let upstream: LocalServer;
  const published = new Map([['tok-1', 'tok-1.thumbprint']]);

  beforeAll(async () => {
    t = await startTestIngress({
      acmeChallenge: (token) =>
        token === 'broken'
          ? Promise.reject(new Error('down'))
          : Promise.resolve(published.get(token)),
    });
    upstream = await listenLocal(
      http.createServer((req, res) => {
        res.sendDate = false;
        res.end(`service ${req.url}`);
      }),
    );
    t.registry.addTunnel(
      fakeTunnel({ proto: 'http', hostname: 'acme.burrow.test', upstreamPort: upstream.port }),
    );
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  const get = (host: string, path: string, method = 'GET'): string =>
    `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`;

  it('answers a published token, a missing one and a store failure, then relays the next request', async () => {
    const host = 'acme.burrow.test';
    const reply = await rawExchange(
      t.httpPort,
      get(host, '/.well-known/acme-challenge/tok-1') +
        get(host, '/.well-known/acme-challenge/tok-1', 'HEAD') +
        get(host, '/.well-known/acme-challenge/nope') +
        get(host, '/.well-known/acme-challenge/bad!token') +
        get(host, '/.well-known/acme-challenge/broken') +
        `GET /after HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    const answers = reply.split(/(?=HTTP\/1\.1 )/);
    expect(answers.map((a) => a.slice(9, 12))).toEqual(['200', '200', '404', '404', '503', '200']);
    expect(answers[0]).toMatch(/\r\n\r\ntok-1\.thumbprint$/);
    expect(answers[1]).toMatch(/\r\n\r\n$/);
    expect(answers[0]).toMatch(/^cache-control: no-store\r$/im);
    // The last one was relayed, on the same connection: the service's answer, without Date.
    expect(answers[5]).toMatch(/service \/after$/);
    expect(answers[5]).not.toMatch(/^date:/im);
  });

  it('answers for a name no endpoint serves', async () => {
    const reply = await rawExchange(
      t.httpPort,
      `GET /.well-known/acme-challenge/tok-1 HTTP/1.1\r\nHost: nobody.example\r\nConnection: close\r\n\r\n`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 200 [\s\S]*tok-1\.thumbprint$/);
  });
});
