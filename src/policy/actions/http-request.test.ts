import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  allowLoopbackEgress,
  bindPolicy,
  oneRule,
  refuseInternalEgress,
} from '../../../test/support/policy-fixtures.js';

/**
 * http-request against a real local HTTP service: what it sends (method, query, headers, body),
 * what later rules read of the answer, redirects, time limits, on_error, and the egress guard
 * refusing loopback unless the operator allows it.
 */

let server: Server;
const flaky = new Map<string, number>();
let base: string;
const seen: Array<{
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      if (req.url!.startsWith('/moved')) {
        res.writeHead(302, { location: '/check?moved=1' }).end();
      } else if (req.url!.startsWith('/flaky')) {
        // 500 twice per URL, then the usual answer: what a retry_condition is for.
        const n = (flaky.get(req.url!) ?? 0) + 1;
        flaky.set(req.url!, n);
        if (n <= 2) res.writeHead(500).end('try again');
        else res.writeHead(200, { 'x-verdict': 'allow' }).end('{"allowed": true}');
      } else if (req.url!.startsWith('/fail')) {
        res.writeHead(500).end('broken');
      } else if (req.url!.startsWith('/slow')) {
        setTimeout(() => res.end('late'), 3000).unref();
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'x-verdict': 'allow' });
        res.end(JSON.stringify({ allowed: !req.url!.includes('ip=10.') }));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => {
  refuseInternalEgress();
  seen.length = 0;
});
afterAll(() => server.close());

const request = { method: 'GET', url: '/page', headers: { host: 'app.burrow.test' } };

function policy(config: Record<string, unknown>) {
  return {
    on_http_request: [
      { actions: [{ type: 'http-request', config }] },
      {
        expressions: [
          'has(actions.ngrok.http_request.res) && !json.decode(actions.ngrok.http_request.res.body).allowed',
        ],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      },
      {
        actions: [
          {
            type: 'custom-response',
            config: {
              body: "${has(actions.ngrok.http_request.res) ? string(actions.ngrok.http_request.res.status_code) + ' ' + actions.ngrok.http_request.res.headers['x-verdict'][0] : 'error ' + actions.ngrok.http_request.error.code}",
            },
          },
        ],
      },
    ],
  };
}

describe('http-request', () => {
  it('sends method, query params, headers and body, and later rules read the answer', async () => {
    allowLoopbackEgress();
    const { runner } = bindPolicy(
      policy({
        url: `${base}/check`,
        method: 'POST',
        query_params: [{ key: 'ip', value: '${conn.client_ip}' }],
        headers: { 'x-path': '${req.url.path}' },
        body: '{"method": "${req.method}"}',
      }),
      'http',
    );
    const allowed = await runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request });
    expect(allowed).toMatchObject({ kind: 'respond', body: '200 allow' });
    expect(seen[0]).toMatchObject({
      method: 'POST',
      url: '/check?ip=192.0.2.7',
      headers: { 'x-path': '/page' },
      body: '{"method": "GET"}',
    });
    const refused = await runner.onHttpRequest({ conn: { client_ip: '10.1.2.3' }, req: request });
    expect(refused).toMatchObject({ kind: 'respond', status: 403 });
  });

  it('follows redirects up to max_redirects, each through the guard', async () => {
    allowLoopbackEgress();
    const follow = bindPolicy(policy({ url: `${base}/moved` }), 'http').runner;
    expect(
      await follow.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      body: '200 allow',
    });
    expect(seen.map((s) => s.url)).toEqual(['/moved', '/check?moved=1']);
    // With no redirect followed, the 302 itself is the answer later rules read.
    const stay = bindPolicy(
      {
        on_http_request: [
          {
            actions: [{ type: 'http-request', config: { url: `${base}/moved`, max_redirects: 0 } }],
          },
          {
            actions: [
              {
                type: 'custom-response',
                config: {
                  body: "${actions.ngrok.http_request.res.status_code} ${actions.ngrok.http_request.res.headers['location'][0]}",
                },
              },
            ],
          },
        ],
      },
      'http',
    ).runner;
    expect(
      await stay.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      body: '302 /check?moved=1',
    });
  });

  it('refuses loopback without --egress-allow: on_error continue goes on, halt answers 502', async () => {
    const go = bindPolicy(policy({ url: `${base}/check` }), 'http');
    expect(
      await go.runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      body: 'error request_failed',
    });
    expect(seen).toEqual([]);
    // Later rules (and so visitors) learn no reason; the operator's event has it.
    const told = bindPolicy(
      {
        on_http_request: [
          { actions: [{ type: 'http-request', config: { url: `${base}/check` } }] },
          {
            actions: [
              {
                type: 'custom-response',
                config: { body: '${actions.ngrok.http_request.error.message}' },
              },
            ],
          },
        ],
      },
      'http',
    ).runner;
    expect(
      await told.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      body: 'the call failed (ERR_BURROW_EGRESS_FAILED)',
    });
    expect(
      go.events
        .eventsFor(go.owner)
        .map((e) => e.message)
        .join('\n'),
    ).toMatch(
      /http-request failed \(request_failed\): .*loopback.*going on \(on_error: continue\)/,
    );
    const halt = bindPolicy(
      oneRule('on_http_request', [
        { type: 'http-request', config: { url: `${base}/check`, on_error: 'halt' } },
      ]),
      'http',
    ).runner;
    expect(
      await halt.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      kind: 'respond',
      status: 502,
      refusal: { code: 'ERR_BURROW_EGRESS_FAILED' },
    });
  });

  it('gives up after timeout', async () => {
    allowLoopbackEgress();
    const { runner } = bindPolicy(policy({ url: `${base}/slow`, timeout: '1s' }), 'http');
    expect(
      await runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      body: 'error timeout',
    });
  });

  it('retry_condition as ngrok prints it retries a 500, and later rules read each attempt', async () => {
    allowLoopbackEgress();
    const { runner } = bindPolicy(
      policy({ url: `${base}/flaky?k=1`, retry_condition: 'last_attempt.res.statusCode == 500' }),
      'http',
    );
    const reply = await runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request });
    expect(reply).toMatchObject({ body: '200 allow' });
    expect(seen.map((s) => s.url)).toEqual(['/flaky?k=1', '/flaky?k=1', '/flaky?k=1']);
  });

  it('retries at most 3 times, keeps the last answer, and never retries a success', async () => {
    allowLoopbackEgress();
    const statusOf = (config: Record<string, unknown>) =>
      bindPolicy(
        {
          on_http_request: [
            { actions: [{ type: 'http-request', config }] },
            {
              actions: [
                {
                  type: 'custom-response',
                  config: {
                    body: '${actions.ngrok.http_request.res.status_code} ${size(actions.ngrok.http_request.attempts)}',
                  },
                },
              ],
            },
          ],
        },
        'http',
      ).runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request });
    const cond = "attempts < 10 && last_attempt.error == '' && last_attempt.req.method == 'GET'";
    expect(await statusOf({ url: `${base}/fail`, retry_condition: cond })).toMatchObject({
      body: '500 4',
    });
    expect(seen).toHaveLength(4);
    seen.length = 0;
    expect(await statusOf({ url: `${base}/fail`, retry_condition: 'attempts < 2' })).toMatchObject({
      body: '500 2',
    });
    seen.length = 0;
    expect(await statusOf({ url: `${base}/check`, retry_condition: 'true' })).toMatchObject({
      body: '200 1',
    });
    expect(seen).toHaveLength(1);
  });

  it('a call without an answer retries on last_attempt.error; a condition that fails stops', async () => {
    // Loopback is refused by the guard (no --egress-allow): every attempt fails without an answer.
    // The condition reads `res` (absent) only from the second attempt on, so its failure, and the
    // event saying so, shows that the first failure was retried.
    const { runner, events, owner } = bindPolicy(
      policy({
        url: `${base}/check`,
        retry_condition:
          "attempts == 1 ? last_attempt.error != '' : last_attempt.res.status_code == 0",
      }),
      'http',
    );
    expect(
      await runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({
      body: 'error request_failed',
    });
    const messages = events.eventsFor(owner).map((e) => e.message);
    expect(
      messages.filter((m) => /retry_condition .* failed: .*; not retrying/.test(m)),
    ).toHaveLength(1);
    expect(seen).toEqual([]);
  });

  it("later rules read ngrok's names too: res.header, res.time_ms and each attempt's response_*", async () => {
    allowLoopbackEgress();
    const { runner } = bindPolicy(
      {
        on_http_request: [
          { actions: [{ type: 'http-request', config: { url: `${base}/moved` } }] },
          {
            expressions: [
              'actions.ngrok.http_request.res.time_ms >= 0',
              'actions.ngrok.http_request.attempts.all(a, a.response_time_ms >= 0)',
            ],
            actions: [
              {
                type: 'custom-response',
                config: {
                  body: "${actions.ngrok.http_request.res.header['x-verdict'][0]} ${actions.ngrok.http_request.attempts.map(a, a.response_status_code)} ${actions.ngrok.http_request.attempts[0].response_header['location'][0]}",
                },
              },
            ],
          },
        ],
      },
      'http',
    );
    expect(
      await runner.onHttpRequest({ conn: { client_ip: '192.0.2.7' }, req: request }),
    ).toMatchObject({ body: 'allow [302,200] /check?moved=1' });
  });

  it('refuses bad configs at save', () => {
    const bad = (config: Record<string, unknown>) => () =>
      bindPolicy(oneRule('on_http_request', [{ type: 'http-request', config }]), 'http');
    expect(bad({})).toThrow(/config\.url is required/);
    expect(bad({ url: 'https://x.example', method: 'TRACE' })).toThrow(
      /config\.method must be one of/,
    );
    expect(bad({ url: 'https://x.example', timeout: '1m' })).toThrow(
      /config\.timeout must be from 1s to 30s/,
    );
    expect(bad({ url: 'https://x.example', on_error: 'retry' })).toThrow(/config\.on_error/);
    expect(bad({ url: 'https://x.example', body: 'x' })).toThrow(
      /config\.body is not sent with GET/,
    );
    expect(bad({ url: '${req.nope}' })).toThrow(/No such key: nope/);
    expect(bad({ url: 'https://x.example', retry_condition: 'last_attempt.nope +' })).toThrow(
      /config\.retry_condition .* is not a valid expression/,
    );
    expect(bad({ url: 'https://x.example', retry_condition: 'attempts' })).toThrow(
      /must give a bool/,
    );
    // The retry variables exist only in retry_condition.
    expect(bad({ url: '${attempts}' })).toThrow(/config\.url/);
  });
});
