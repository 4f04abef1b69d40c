import http, { Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configureEgress, parseEgressAllow } from '../../../core/egress-guard.js';
import { PolicyEventLog } from '../../../policy/index.js';
import { jwtValidation, testJwtIssuer } from '../../../../test/support/jwt.js';
import { withPolicy } from '../../../../test/support/policy.js';
import {
  fakeTunnel,
  httpRequest,
  rawExchange,
  listenLocal,
  startTestIngress,
  type FakeTunnel,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';

/**
 * Endpoints whose policy has no HTTP phase (on_tcp_connect only: IP restrictions, connect-time
 * rate limits) and those with HTTP phases, on the relay, with on_tcp_connect run once per
 * connection. The upstream sends no `Date` header and the relay passes its head on as bytes: a
 * reply without one is the service's, relayed.
 */
describe('policies on the relay', () => {
  let t: TestIngress;
  let upstream: LocalServer;
  const events = new PolicyEventLog();
  let n = 0;
  /** The X-Client-IP each request reached the service with. */
  const seenClientIp: Array<string | string[] | undefined> = [];
  /** The target each request reached the service with. */
  const seenUrl: Array<string | undefined> = [];

  beforeAll(async () => {
    t = await startTestIngress();
    upstream = await listenLocal(
      http.createServer((req, res) => {
        res.sendDate = false;
        seenClientIp.push(req.headers['x-client-ip']);
        seenUrl.push(req.url);
        if (req.url?.startsWith('/fail')) res.statusCode = 500;
        res.setHeader('x-powered-by', 'the test service');
        res.end('ok');
      }),
    );
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  /** An endpoint with `policy`; restrict-ips' IP policy lookup answers later (a promise). */
  function online(policy: string): { tunnel: FakeTunnel; host: string } {
    const host = `lean${++n}.burrow.test`;
    const tunnel = withPolicy(
      fakeTunnel({ proto: 'http', hostname: host, upstreamPort: upstream.port }),
      policy,
      events,
      () => Promise.resolve([{ cidr: '127.0.0.0/8', action: 'allow' as const }]),
    );
    t.registry.addTunnel(tunnel);
    return { tunnel, host };
  }

  /** `count` requests over one kept-alive connection. */
  async function keptAlive(host: string, count: number) {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const replies = [];
      for (let i = 0; i < count; i++) replies.push(await httpRequest(t.httpPort, { host, agent }));
      return replies;
    } finally {
      agent.destroy();
    }
  }

  it('carries an on_tcp_connect-only endpoint, running the phase once per connection', async () => {
    const { tunnel, host } = online('on_tcp_connect: [{actions: [{type: log}]}]');
    const replies = await keptAlive(host, 3);
    expect(replies.map((r) => [r.status, r.body, r.headers.date])).toEqual([
      [200, 'ok', undefined],
      [200, 'ok', undefined],
      [200, 'ok', undefined],
    ]);
    expect(events.eventsFor(tunnel.id).map((e) => e.outcome)).toEqual(['log']);
  });

  it('runs restrict-ips in on_http_response on the relay: let through as relayed, refused with the edge page', async () => {
    const { host } = online(`
on_http_response:
  - expressions: ["req.url.path == '/office'"]
    actions: [{type: restrict-ips, config: {allow: ["127.0.0.0/8"]}}]
  - expressions: ["req.url.path == '/abroad'"]
    actions: [{type: restrict-ips, config: {deny: ["127.0.0.0/8"]}}]
`);
    const [passed] = await keptAlive(host, 1);
    // Relayed (no Date header, which Node's http server would add): the service's own answer.
    expect([passed!.status, passed!.body, passed!.headers.date]).toEqual([200, 'ok', undefined]);
    const office = await httpRequest(t.httpPort, { host, path: '/office' });
    expect([office.status, office.body, office.headers.date]).toEqual([200, 'ok', undefined]);
    const abroad = await httpRequest(t.httpPort, { host, path: '/abroad' });
    expect(abroad.status).toBe(403);
    expect(abroad.headers['burrow-error-code']).toBe('ERR_BURROW_IP_RESTRICTED');
  });

  it('rewrites the target on the relay (url-rewrite): the service gets the new one, checked as the edge reads targets', async () => {
    const { tunnel, host } = online(`
on_http_request:
  - actions: [{type: url-rewrite, config: {from: "/old/([a-z]+)", to: "/new/$1"}}]
`);
    const before = seenUrl.length;
    const replies = await keptAlive(host, 2);
    expect(replies.map((r) => [r.status, r.body, r.headers.date])).toEqual([
      [200, 'ok', undefined],
      [200, 'ok', undefined],
    ]);
    const moved = await httpRequest(t.httpPort, { host, path: '/old/a?b=1' });
    // Relayed (no Date header), with the new target.
    expect([moved.status, moved.headers.date]).toEqual([200, undefined]);
    expect(seenUrl.slice(before)).toEqual(['/', '/', '/new/a?b=1']);
    expect(tunnel.connects.length).toBeGreaterThan(0);
    // A rewrite to a target the edge would refuse from a client is refused, not sent.
    const bad = online(
      'on_http_request: [{actions: [{type: url-rewrite, config: {from: "/x", to: "/a b"}}]}]',
    );
    const refused = await httpRequest(t.httpPort, { host: bad.host, path: '/x' });
    expect(refused.status).toBe(400);
    expect(bad.tunnel.connects).toEqual([]);
  });

  it('tells circuit-breaker each status on the relay: 5xx answers open it, and the open breaker answers 503', async () => {
    const { tunnel, host } = online(`
on_http_request:
  - actions: [{type: circuit-breaker, config: {error_threshold: 0.5, volume_threshold: 3, tripped_duration: 60s}}]
`);
    const statuses = [];
    for (const path of ['/', '/fail', '/fail']) {
      const r = await httpRequest(t.httpPort, { host, path });
      // Relayed (no Date header): the service's own answers.
      expect(r.headers.date).toBeUndefined();
      statuses.push(r.status);
    }
    expect(statuses).toEqual([200, 500, 500]);
    const streams = tunnel.connects.length;
    const open = await httpRequest(t.httpPort, { host });
    expect(open.status).toBe(503);
    expect(tunnel.connects.length).toBe(streams);
  });

  it('waits on the relay for a decision that waits (jwt-validation): a valid token is relayed, a missing one refused', async () => {
    const issuer = await testJwtIssuer();
    const keys = await listenLocal(http.createServer((_req, res) => res.end(issuer.jwks)));
    const entry = parseEgressAllow('127.0.0.1');
    if ('problem' in entry) throw new Error(entry.problem);
    configureEgress({ allow: [entry] });
    try {
      const action = jwtValidation(`http://127.0.0.1:${keys.port}/jwks.json`, [
        { type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' },
      ]);
      const { tunnel, host } = online(
        `on_http_request: [{actions: [${JSON.stringify(action)}, {type: add-headers, config: {headers: {x-client-ip: "\${actions.ngrok.jwt_validation.claims.sub}"}}}]}]`,
      );
      const headers = { authorization: `Bearer ${await issuer.sign()}` };
      const before = seenClientIp.length;
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const replies = [];
      for (let i = 0; i < 3; i++)
        replies.push(await httpRequest(t.httpPort, { host, headers, agent, path: `/r${i}` }));
      agent.destroy();
      // Relayed (no Date header) on one kept stream, with what the token said.
      expect(replies.map((r) => [r.status, r.body, r.headers.date])).toEqual([
        [200, 'ok', undefined],
        [200, 'ok', undefined],
        [200, 'ok', undefined],
      ]);
      expect(seenClientIp.slice(before)).toEqual(['alice', 'alice', 'alice']);
      expect(seenUrl.slice(-3)).toEqual(['/r0', '/r1', '/r2']);
      expect(tunnel.connects).toHaveLength(1);
      const refused = await httpRequest(t.httpPort, { host });
      expect(refused.status).toBe(401);
      expect(tunnel.connects).toHaveLength(1);

      // A token read from the body: the relay reads the body for it first (body-peek.ts), then
      // relays it as sent (no Date header).
      const fromBody = jwtValidation(`http://127.0.0.1:${keys.port}/jwks.json`, [
        { type: 'jwt', method: 'body', name: 'token' },
      ]);
      const posted = online(`on_http_request: [{actions: [${JSON.stringify(fromBody)}]}]`);
      const reply = await httpRequest(t.httpPort, {
        host: posted.host,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `token=${await issuer.sign()}`,
      });
      expect([reply.status, reply.body, reply.headers.date]).toEqual([200, 'ok', undefined]);
      const unsigned = await httpRequest(t.httpPort, {
        host: posted.host,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'token=not-a-jwt',
      });
      expect(unsigned.status).toBe(401);
    } finally {
      configureEgress({ allow: [] });
      await keys.close();
    }
  });

  it("writes the policy's own answers on the relay: keep-alive, pipelined in order, HEAD without a body, closed after an unread body", async () => {
    const { tunnel, host } = online(`
on_http_request:
  - expressions: ["req.url.path == '/no'"]
    actions: [{type: deny, config: {status_code: 403}}]
  - expressions: ["req.url.path == '/hi'"]
    actions: [{type: custom-response, config: {status_code: 200, body: "héllo \${req.method}", headers: {x-answer: "1"}}}]
`);
    const streams = tunnel.connects.length;
    // Two answers and a relayed request in one write: answered in order on one connection.
    const pipelined = await rawExchange(
      t.httpPort,
      `GET /no HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `HEAD /hi HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET /hi HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET /ok HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    const statuses = [...pipelined.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(['403', '200', '200', '200']);
    const parts = pipelined.split(/(?=HTTP\/1\.1 \d{3} )/);
    // Written by the relay: Node's server would add keep-alive headers.
    expect(parts[0]).not.toMatch(/^keep-alive:/im);
    expect(parts[0]).toMatch(/^date: /im);
    expect(parts[0]).toMatch(/^burrow-error-code: ERR_/im);
    // HEAD: the length of its body in UTF-8 bytes ("héllo HEAD"), and no body.
    expect(parts[1]).toMatch(/^content-length: 11\r$/im);
    expect(parts[1]).toMatch(/\r\n\r\n$/);
    expect(Buffer.from(parts[2]!, 'latin1').toString('utf8')).toMatch(
      /x-answer: 1[\s\S]*\r\n\r\nhéllo GET$/,
    );
    expect(parts[3]).toMatch(/\r\n\r\nok$/);
    expect(tunnel.connects.length).toBeLessThanOrEqual(streams + 1);
    // A body the relay never read: the connection ends after the answer.
    const posted = await rawExchange(
      t.httpPort,
      `POST /no HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 5\r\n\r\nhello` +
        `GET /ok HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    );
    expect([...posted.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1])).toEqual(['403']);
    expect(posted).toMatch(/^connection: close\r$/im);
  });

  it('runs header phases on the relay: request and response headers changed, the policy’s answer written by the relay', async () => {
    const { tunnel, host } = online(`
on_http_request:
  - expressions: ["'x-block' in req.headers"]
    actions: [{type: deny}]
  - actions: [{type: add-headers, config: {headers: {x-client-ip: "\${conn.client_ip}"}}}]
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-served-by: burrow}}}, {type: remove-headers, config: {headers: [x-powered-by]}}]
`);
    const before = seenClientIp.length;
    const replies = await keptAlive(host, 2);
    const seen = (r: (typeof replies)[number]) => [
      r.status,
      r.body,
      r.headers.date,
      r.headers['x-served-by'],
      r.headers['x-powered-by'],
    ];
    expect(replies.map(seen)).toEqual([
      [200, 'ok', undefined, 'burrow', undefined],
      [200, 'ok', undefined, 'burrow', undefined],
    ]);
    // The service got the request header the policy added, from the relay, on one stream.
    expect(seenClientIp.slice(before)).toEqual(['127.0.0.1', '127.0.0.1']);
    expect(tunnel.connects).toHaveLength(1);
    const denied = await httpRequest(t.httpPort, { host, headers: { 'x-block': '1' } });
    expect(denied.status).toBe(403);
  });

  it('closes a connection on_tcp_connect refuses, with no request reaching the agent', async () => {
    const { tunnel, host } = online(
      'on_tcp_connect: [{expressions: ["conn.client_ip == \'127.0.0.1\'"], actions: [{type: deny}]}]',
    );
    await expect(httpRequest(t.httpPort, { host })).rejects.toThrow();
    expect(tunnel.connects).toEqual([]);
    // Decided once per connection.
    expect(events.eventsFor(tunnel.id).map((e) => e.outcome)).toEqual(['denied']);
  });

  it('a decision that has to wait (an IP policy lookup) is waited for on the relay, made once per connection', async () => {
    const { tunnel, host } = online(
      'on_tcp_connect: [{actions: [{type: log}, {type: restrict-ips, config: {ip_policies: [ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52]}}]}]',
    );
    const replies = await keptAlive(host, 2);
    expect(replies.map((r) => [r.status, r.body])).toEqual([
      [200, 'ok'],
      [200, 'ok'],
    ]);
    expect(replies.map((r) => r.headers.date)).toEqual([undefined, undefined]);
    expect(events.eventsFor(tunnel.id).map((e) => e.outcome)).toEqual(['log']);
  });
});
