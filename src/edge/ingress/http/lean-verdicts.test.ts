import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configureEgress, parseEgressAllow } from '../../../core/egress-guard.js';
import { PolicyEventLog } from '../../../policy/index.js';
import { withPolicy } from '../../../../test/support/policy.js';
import {
  fakeTunnel,
  httpRequest,
  listenLocal,
  rawExchange,
  startTestIngress,
  type FakeTunnel,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';

/**
 * Verdicts the relay carries out itself: a connection the policy closes, an
 * outside call the decision waits for (http-request), and the edge's page for an answer whose
 * header cannot be written. The service sends no `Date` header, so a reply without one was relayed.
 */
describe('the relay closes, waits and answers for the policy', () => {
  let t: TestIngress;
  let upstream: LocalServer;
  let checks: LocalServer;
  const events = new PolicyEventLog();
  let n = 0;
  const seen: string[] = [];

  beforeAll(async () => {
    t = await startTestIngress();
    upstream = await listenLocal(
      http.createServer((req, res) => {
        res.sendDate = false;
        seen.push(`${req.url} ${String(req.headers['x-verdict'])}`);
        if (req.url === '/fail') res.statusCode = 500;
        res.end(req.url === '/fail' ? 'a stack trace' : 'ok');
      }),
    );
    // The outside service http-request asks: it allows paths that do not start with /no.
    checks = await listenLocal(
      http.createServer((req, res) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ allowed: !req.url!.startsWith('/check/no') }));
      }),
    );
    const entry = parseEgressAllow('127.0.0.1');
    if ('problem' in entry) throw new Error(entry.problem);
    configureEgress({ allow: [entry] });
  });
  afterAll(async () => {
    configureEgress({ allow: [] });
    await t.close();
    await upstream.close();
    await checks.close();
  });

  function online(policy: string): { tunnel: FakeTunnel; host: string } {
    const host = `verdict${++n}.burrow.test`;
    const tunnel = withPolicy(
      fakeTunnel({ proto: 'http', hostname: host, upstreamPort: upstream.port }),
      policy,
      events,
    );
    t.registry.addTunnel(tunnel);
    return { tunnel, host };
  }

  it('close-connection: the connection closes with no answer, after the requests before it were relayed', async () => {
    const { host, tunnel } = online(`
on_http_request:
  - expressions: ["req.url.path == '/bye'"]
    actions: [{type: close-connection}]
`);
    const before = seen.length;
    const reply = await rawExchange(
      t.httpPort,
      `GET /hi HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /bye HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET /after HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    );
    // One answer (relayed: no Date), then nothing: /bye closed the connection, /after never ran.
    expect([...reply.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200']);
    expect(reply).not.toMatch(/^date:/im);
    expect(seen.slice(before)).toEqual(['/hi undefined']);
    expect(events.eventsFor(tunnel.id).map((e) => e.outcome)).toContain('closed');
  });

  it('http-request: the decision waits for the outside call, and the request is relayed with its result', async () => {
    const base = `http://127.0.0.1:${checks.port}`;
    const { host } = online(`
on_http_request:
  - actions:
      - type: http-request
        config: {url: "${base}/check\${req.url.path}"}
  - expressions: ["!json.decode(actions.ngrok.http_request.res.body).allowed"]
    actions: [{type: deny, config: {status_code: 403}}]
  - actions: [{type: add-headers, config: {headers: {x-verdict: "\${actions.ngrok.http_request.res.status_code}"}}}]
`);
    const before = seen.length;
    const allowed = await httpRequest(t.httpPort, { host, path: '/yes' });
    expect([allowed.status, allowed.body, allowed.headers.date]).toEqual([200, 'ok', undefined]);
    const refused = await httpRequest(t.httpPort, { host, path: '/no' });
    expect(refused.status).toBe(403);
    expect(seen.slice(before)).toEqual(['/yes 200']);
  });

  it('http-request in on_http_response: the response waits for the call, then goes with its result', async () => {
    const base = `http://127.0.0.1:${checks.port}`;
    const { host } = online(`
on_http_response:
  - actions:
      - type: http-request
        config: {url: "${base}/check/\${res.status_code}"}
      - type: add-headers
        config: {headers: {x-checked: "\${actions.ngrok.http_request.res.status_code}"}}
`);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const replies = [];
      for (const path of ['/a', '/b'])
        replies.push(await httpRequest(t.httpPort, { host, path, agent }));
      // Relayed (no Date), on one kept connection, each with the call's result.
      expect(
        replies.map((r) => [r.status, r.body, r.headers['x-checked'], r.headers.date]),
      ).toEqual([
        [200, 'ok', '200', undefined],
        [200, 'ok', '200', undefined],
      ]);
    } finally {
      agent.destroy();
    }
  });

  it('custom-response in on_http_response replaces the service’s answer (a custom error page), and the connection closes', async () => {
    const { host } = online(`
on_http_response:
  - expressions: ["res.status_code >= 500"]
    actions:
      - type: custom-response
        config: {status_code: 503, headers: {content-type: text/plain}, body: "down for maintenance"}
`);
    // The endpoint rides the relay: its ordinary answers come as the service wrote them.
    const fine = await httpRequest(t.httpPort, { host, path: '/ok' });
    expect([fine.status, fine.body, fine.headers.date]).toEqual([200, 'ok', undefined]);
    const reply = await rawExchange(
      t.httpPort,
      `GET /fail HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /ok HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    );
    // The 500's body was not read: the policy's page, then the connection closes.
    expect(reply).toMatch(
      /^HTTP\/1\.1 503 Service Unavailable\r\n[\s\S]*\r\n\r\ndown for maintenance$/,
    );
    expect(reply).toMatch(/^connection: close\r$/im);
  });

  it("an answer whose header cannot be written is the edge's 502 page, and nothing reaches the service", async () => {
    const { host } = online(`
on_http_request:
  - actions:
      - type: custom-response
        config: {status_code: 200, headers: {x-echo: "\${req.url.query_params['q'][0]}"}, body: hi}
`);
    const before = seen.length;
    const reply = await httpRequest(t.httpPort, { host, path: '/?q=a%01b' });
    expect(reply.status).toBe(502);
    expect(reply.headers['burrow-error-code']).toEqual(expect.any(String));
    const fine = await httpRequest(t.httpPort, { host, path: '/?q=ab' });
    expect([fine.status, fine.body, fine.headers['x-echo']]).toEqual([200, 'hi', 'ab']);
    expect(seen.length).toBe(before);
  });
});
