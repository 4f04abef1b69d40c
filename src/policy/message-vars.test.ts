import { describe, expect, it } from 'vitest';
import {
  bindPolicy,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
  sync,
} from '../../test/support/policy-fixtures.js';
import type { HeaderInput } from './headers.js';
import type { RequestInput } from './variables.js';

/**
 * Issue 31: `req.content_type` / `res.content_type` with `.raw` and `.parameters`,
 * `req.ts.body_received`, `req.trailers`, `req.url.uri` / `.user_password`, `req.user_agent` as a
 * string with ngrok's fields and `res.cookies`, as ngrok's HTTP variables reference lists them.
 */

const request = (over: Partial<RequestInput> = {}): RequestInput => ({
  ...SAMPLE_REQUEST,
  ...over,
});
const withType = (type: string) =>
  request({ headers: { ...SAMPLE_REQUEST.headers, 'content-type': type } });

/** What a custom-response rendering `body` answers, when `expressions` match. */
function answer(body: string, req: RequestInput, expressions: string[] = []) {
  const { runner } = bindPolicy(
    oneRule('on_http_request', [{ type: 'custom-response', config: { body } }], expressions),
    'http',
  );
  return runner.onHttpRequest({ conn: CONN_TLS13, req });
}

describe('req.content_type', () => {
  it("is the media type as a string, with the header as sent and its parameters (ngrok's examples)", () => {
    const req = withType('Application/JSON; Charset=utf-8; boundary="a;b \\"c\\""');
    expect(
      sync(
        answer('${req.content_type}|${req.content_type.raw}|${req.content_type.parameters}', req, [
          "req.content_type == 'application/json'",
          "req.content_type.parameters['charset'] == 'utf-8'",
          'req.content_type.raw == \'Application/JSON; Charset=utf-8; boundary="a;b \\\\"c\\\\""\'',
        ]),
      ),
    ).toMatchObject({
      kind: 'respond',
      body: 'application/json|Application/JSON; Charset=utf-8; boundary="a;b \\"c\\""|{"charset":"utf-8","boundary":"a;b \\"c\\""}',
    });
  });

  it('takes the string functions, in, + and string() as a string would', () => {
    const expressions = [
      "req.content_type in ['text/plain', 'application/json']",
      "req.content_type.startsWith('application/')",
      "req.content_type.endsWith('json') && req.content_type.contains('/')",
      "req.content_type.matches('^application/(json|xml)$')",
      "string(req.content_type) + ';' == req.content_type + ';'",
      'req.content_type.size() == 16',
      "req.ContentType != 'text/html'",
    ];
    expect(sync(answer('ok', withType('application/json'), expressions))).toMatchObject({
      body: 'ok',
    });
  });

  it("is '' with empty fields without the header, and skips a malformed parameter", () => {
    const { 'content-type': _, ...headers } = SAMPLE_REQUEST.headers as HeaderInput;
    const none = request({ headers });
    const body = '[${req.content_type}][${req.content_type.raw}][${req.content_type.parameters}]';
    expect(sync(answer(body, none))).toMatchObject({ body: '[][][{}]' });
    expect(
      sync(answer('${req.content_type.parameters}', withType('text/plain;;=x; a = 1 ;b'))),
    ).toMatchObject({ body: '{"a":"1"}' });
  });

  it('reads the header as an earlier rule changed it, and res.content_type the same way', async () => {
    const { runner } = bindPolicy(
      {
        on_http_request: [
          { actions: [{ type: 'remove-headers', config: { headers: ['content-type'] } }] },
          {
            actions: [{ type: 'add-headers', config: { headers: { 'content-type': 'text/csv' } } }],
          },
          {
            expressions: ["req.content_type == 'text/csv'"],
            actions: [{ type: 'set-vars', config: { vars: { seen: '${req.content_type.raw}' } } }],
          },
        ],
        on_http_response: [
          {
            expressions: ["res.content_type.parameters['charset'] == 'utf-8'"],
            actions: [
              {
                type: 'custom-response',
                config: { body: '${vars.seen} ${res.content_type} ${res.content_type.raw}' },
              },
            ],
          },
        ],
      },
      'http',
    );
    const first = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() }));
    expect(first.kind).toBe('continue');
    const res = await runner.onHttpResponse({
      conn: CONN_TLS13,
      req: request(),
      res: SAMPLE_RESPONSE,
      vars: first.vars,
    });
    expect(res).toMatchObject({ body: 'text/csv text/html text/html; charset=utf-8' });
  });
});

describe('req.ts.body_received', () => {
  const NOW = Date.parse('2026-01-02T03:04:05.000Z');
  const bound = () =>
    bindPolicy(
      oneRule(
        'on_http_request',
        [{ type: 'custom-response', config: { body: '${req.ts.body_received}' } }],
        ["req.ts.body_received > timestamp('2023-12-31T00:00:00Z')"],
      ),
      'http',
      { now: () => NOW },
    );

  it('is when the body was read whole: a policy reading it waits for the body first', async () => {
    let reads = 0;
    const body = () => {
      reads++;
      return Promise.resolve(Buffer.from('{"a":1}'));
    };
    const decision = await bound().runner.onHttpRequest({
      conn: CONN_TLS13,
      req: request({ body }),
    });
    expect(decision).toMatchObject({ kind: 'respond', body: '2026-01-02T03:04:05.000Z' });
    expect(reads).toBe(1);
  });

  it('is 1970 (unknown) for a request without a body, so the rule does not match', async () => {
    const empty = () => Promise.resolve(Buffer.alloc(0));
    for (const req of [request({ body: empty }), request()]) {
      const decision = await bound().runner.onHttpRequest({ conn: CONN_TLS13, req });
      expect(decision.kind).toBe('continue');
    }
  });

  it('closes the request, with an error event, when the body cannot be read', async () => {
    const { runner, events, owner } = bound();
    const body = () => Promise.reject(new Error('the body is over 10485760 bytes'));
    const decision = await runner.onHttpRequest({ conn: CONN_TLS13, req: request({ body }) });
    expect(decision.kind).toBe('close');
    expect(events.eventsFor(owner).map((e) => e.message)).toContain(
      'the body could not be read for req.ts or req.trailers: the body is over 10485760 bytes',
    );
  });

  it('is known in on_http_response once on_http_request read the body for it', async () => {
    const { runner } = bindPolicy(
      {
        on_http_request: [{ actions: [{ type: 'log', config: { metadata: { a: '1' } } }] }],
        on_http_response: [
          {
            actions: [{ type: 'custom-response', config: { body: '${req.ts.body_received}' } }],
          },
        ],
      },
      'http',
      { now: () => NOW },
    );
    const req = request({ body: () => Promise.resolve(Buffer.from('x')) });
    const first = await runner.onHttpRequest({ conn: CONN_TLS13, req });
    const res = await runner.onHttpResponse({
      conn: CONN_TLS13,
      req,
      res: SAMPLE_RESPONSE,
      vars: first.vars,
    });
    expect(res).toMatchObject({ body: '2026-01-02T03:04:05.000Z' });
  });
});

describe('req.url.uri, req.url.user_password', () => {
  it('are the path and query as sent, and always empty', () => {
    const req = request({ url: '/a%2Fb/c?x=1&y' });
    expect(
      sync(answer('${req.url.uri}|${req.url.user_password}', req, ["req.url.user_password == ''"])),
    ).toMatchObject({ body: '/a%2Fb/c?x=1&y|' });
  });
});

describe('req.user_agent as ngrok types it', () => {
  const agent = (ua: string) =>
    request({ headers: { ...SAMPLE_REQUEST.headers, 'user-agent': ua } });
  const IPHONE =
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1';
  const IPAD =
    'Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1';
  const EDGE =
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91';
  const BOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
  const flags =
    '${req.user_agent.is_mobile} ${req.user_agent.is_tablet} ${req.user_agent.is_desktop} ${req.user_agent.is_bot}';

  it('is the header as a string, with ngrok field names (os, device, is_mobile, url…)', () => {
    expect(
      sync(
        answer(`\${req.user_agent.os} \${req.user_agent.device} ${flags}`, agent(IPHONE), [
          `req.user_agent == '${IPHONE}'`,
          "req.user_agent.contains('iPhone')",
        ]),
      ),
    ).toMatchObject({ body: 'iOS iPhone true false false false' });
    expect(sync(answer(`\${req.user_agent.device} ${flags}`, agent(IPAD)))).toMatchObject({
      body: 'iPad false true false false',
    });
    expect(sync(answer(`\${req.user_agent} ${flags}`, agent(EDGE)))).toMatchObject({
      body: `${EDGE} false false true false`,
    });
    expect(sync(answer(`\${req.user_agent.url} ${flags}`, agent(BOT)))).toMatchObject({
      body: 'http://www.google.com/bot.html false false false true',
    });
  });
});

describe('res.cookies', () => {
  it("reads Set-Cookie with ngrok's attribute fields, longest path first", async () => {
    const { runner } = bindPolicy(
      oneRule(
        'on_http_response',
        [
          {
            type: 'custom-response',
            config: {
              body: "${res.cookies['sid'][0].path} ${res.cookies['sid'][0].domain} ${res.cookies['sid'][0].max_age} ${res.cookies['sid'][0].same_site} ${res.cookies['sid'][0].unparsed_attributes} ${res.cookies['sid'][1].path} ${res.cookies['sid'][1].expires}",
            },
          },
        ],
        [
          'size(res.cookies) == 2',
          "res.cookies['sid'][0].http_only && res.cookies['sid'][0].secure",
          "res.cookies['sid'][0].max_age > duration('30m')",
          "res.cookies['sid'][1].expires > timestamp('2023-12-31T00:00:00Z')",
          "res.cookies['theme'][0].value == 'dark' && !res.cookies['theme'][0].secure",
        ],
      ),
      'http',
    );
    const res = {
      status_code: 200,
      headers: {
        'set-cookie': [
          'sid=short; Path=/; Expires=Wed, 21 Oct 2099 07:28:00 GMT',
          'sid="long"; Path=/app/admin; Domain=.Example.com; Max-Age=3600; Secure; HttpOnly; SameSite=Lax; Partitioned; Priority=High',
          'theme=dark',
          'no-value-pair',
        ],
      },
    };
    const decision = await runner.onHttpResponse({ conn: CONN_TLS13, req: request(), res });
    expect(decision).toMatchObject({
      body: '/app/admin example.com 3600s Lax {"Partitioned":"","Priority":"High"} / 2099-10-21T07:28:00.000Z',
    });
  });
});

describe('req.trailers', () => {
  it("are read after the body, when a policy names them (ngrok's example)", async () => {
    let ended = false;
    const req = request({
      body: () => {
        ended = true;
        return Promise.resolve(Buffer.from('data'));
      },
      trailers: () => (ended ? { baz: ['Fizz'], 'x-checksum': 'abc' } : {}),
    });
    const decision = await answer("${req.trailers['X-Checksum'][0]}", req, [
      "'Fizz' in req.trailers['baz']",
    ]);
    expect(decision).toMatchObject({ kind: 'respond', body: 'abc' });
    expect(sync(answer('${size(req.trailers)}', request()))).toMatchObject({ body: '0' });
  });
});
