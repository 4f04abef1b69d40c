import { describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import {
  bindPolicy,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  sync,
} from '../../test/support/policy-fixtures.js';
import { compilePolicy } from './compile.js';

/**
 * Issue 31, "no silent difference": what an ngrok user copies behaves as ngrok documents it, or
 * is refused at save with a reason.
 */

const request = (over: Partial<typeof SAMPLE_REQUEST> = {}) => ({ ...SAMPLE_REQUEST, ...over });

describe('header names in expressions', () => {
  it('finds a header indexed with an upper-case literal, in req.headers and Headers, with in and []', () => {
    const { runner } = bindPolicy(
      oneRule(
        'on_http_request',
        [{ type: 'custom-response', config: { status_code: 200, body: 'v2' } }],
        [
          "req.headers['X-Api-Version'][0] == '2'",
          "'X-API-VERSION' in req.headers",
          "req.Headers['x-api-version'][0] == '2'",
        ],
      ),
      'http',
    );
    const req = request({ headers: { ...SAMPLE_REQUEST.headers, 'x-api-version': '2' } });
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req }))).toMatchObject({
      kind: 'respond',
      body: 'v2',
    });
  });
});

describe('templates in config fields', () => {
  const rewrite = (from: string) =>
    oneRule('on_http_request', [{ type: 'url-rewrite', config: { from, to: '/new/$1' } }]);

  it('interpolates a url-rewrite from (ngrok example: ${req.url.authority})', () => {
    const { runner } = bindPolicy(rewrite('https://${req.url.authority}/api/v1/(.*)'), 'https');
    const decision = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() }));
    expect(decision).toMatchObject({ kind: 'continue', rewrite: '/new/users/42?page=2&page=3' });
  });

  it('refuses an unknown variable in a url-rewrite from at save', () => {
    expect(() =>
      compilePolicy(JSON.stringify(rewrite('${req.url.authorty}/(.*)')), { protocol: 'http' }),
    ).toThrow(
      /config\.from "\$\{req\.url\.authorty\}\/\(\.\*\)" is not a valid expression: in \$\{req\.url\.authorty\}: No such key: authorty/,
    );
  });

  it('refuses ${} in a field that does not interpolate, naming it', () => {
    const policy = oneRule('on_http_request', [
      {
        type: 'rate-limit',
        config: {
          name: '${conn.client_ip}',
          capacity: 1,
          rate: '60s',
          algorithm: 'sliding_window',
          bucket_key: ['conn.client_ip'],
        },
      },
    ]);
    let error: unknown;
    try {
      compilePolicy(JSON.stringify(policy), { protocol: 'http' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(
      /config\.name holds "\$\{conn\.client_ip\}", but this field is not interpolated/,
    );
    // A credential may hold any text, `${` included.
    expect(() =>
      compilePolicy(
        JSON.stringify(
          oneRule('on_http_request', [
            { type: 'basic-auth', config: { credentials: ['alice:pa${ss}word'] } },
          ]),
        ),
        { protocol: 'http' },
      ),
    ).not.toThrow();
  });
});

describe('a rule whose expression fails at run time', () => {
  const failing = "req.headers['x-missing'][0] == 'x'";
  const cases: Array<[string, unknown, 'respond' | 'continue']> = [
    ['deny', { type: 'deny' }, 'respond'],
    ['restrict-ips', { type: 'restrict-ips', config: { allow: ['10.0.0.0/8'] } }, 'respond'],
    ['basic-auth', { type: 'basic-auth', config: { credentials: ['user:password1'] } }, 'respond'],
    [
      'rate-limit',
      {
        type: 'rate-limit',
        config: {
          capacity: 1,
          rate: '60s',
          algorithm: 'sliding_window',
          bucket_key: ['conn.client_ip'],
        },
      },
      'continue',
    ],
    ['custom-response', { type: 'custom-response', config: { body: 'x' } }, 'continue'],
    ['redirect', { type: 'redirect', config: { to: 'https://elsewhere.example/' } }, 'continue'],
    ['add-headers', { type: 'add-headers', config: { headers: { 'x-a': '1' } } }, 'continue'],
    [
      'jwt-validation',
      {
        type: 'jwt-validation',
        config: {
          issuer: { allow_list: [{ value: 'https://id.example/' }] },
          http: {
            tokens: [{ type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' }],
          },
          jws: {
            allowed_algorithms: ['RS256'],
            keys: { sources: { additional_jkus: ['https://id.example/jwks'] } },
          },
        },
      },
      'respond',
    ],
    [
      'verify-webhook',
      { type: 'verify-webhook', config: { provider: 'github', secret: 'a-webhook-secret' } },
      'respond',
    ],
    [
      'oauth',
      {
        type: 'oauth',
        config: { provider: 'github', client_id: 'Iv1.abc', client_secret: 's3cret-value' },
      },
      'respond',
    ],
  ];
  it.each(cases)('%s: a failing expression gives %s by default', async (_name, action, kind) => {
    const { runner } = bindPolicy(oneRule('on_http_request', [action], [failing]), 'https');
    const req = request({ headers: { ...SAMPLE_REQUEST.headers, accept: 'text/html' } });
    const body = () => Promise.resolve(Buffer.from('{}'));
    expect((await runner.onHttpRequest({ conn: CONN_TLS13, req: { ...req, body } })).kind).toBe(
      kind,
    );
  });

  it('close-connection in on_tcp_connect: a failing expression closes', () => {
    const { runner } = bindPolicy(
      oneRule(
        'on_tcp_connect',
        [{ type: 'close-connection' }],
        ["conn.tls.client.san.dns_names[3] == 'x'"],
      ),
      'tls',
    );
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('close');
  });

  it('rate-limit fails closed: the rule runs, so a second request is limited', () => {
    const { runner } = bindPolicy(oneRule('on_http_request', [cases[3]![1]], [failing]), 'http');
    sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() }));
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() }))).toMatchObject({
      kind: 'respond',
      status: 429,
    });
  });

  it('on_expression_error overrides the default both ways', () => {
    const rule = (action: unknown, choice: string) => ({
      on_http_request: [{ on_expression_error: choice, expressions: [failing], actions: [action] }],
    });
    const deny = bindPolicy(rule({ type: 'deny' }, 'skip'), 'http').runner;
    expect(sync(deny.onHttpRequest({ conn: CONN_TLS13, req: request() })).kind).toBe('continue');
    const respond = bindPolicy(
      rule({ type: 'custom-response', config: { body: 'x' } }, 'match'),
      'http',
    ).runner;
    expect(sync(respond.onHttpRequest({ conn: CONN_TLS13, req: request() })).kind).toBe('respond');
    expect(() =>
      compilePolicy(JSON.stringify(rule({ type: 'deny' }, 'open')), { protocol: 'http' }),
    ).toThrow(/on_expression_error must be 'match' .* or 'skip'/);
  });

  it('a failing expression counts as true but the others still decide', () => {
    const { runner } = bindPolicy(
      oneRule('on_http_request', [{ type: 'deny' }], [failing, "req.method == 'DELETE'"]),
      'http',
    );
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() })).kind).toBe('continue');
  });
});

describe('actions.ngrok.restrict_ips', () => {
  it('says allow or deny and the block that matched', () => {
    const { runner } = bindPolicy(
      {
        on_http_request: [
          { actions: [{ type: 'restrict-ips', config: { allow: ['203.0.113.0/24'] } }] },
          {
            actions: [
              {
                type: 'custom-response',
                config: {
                  body: '${actions.ngrok.restrict_ips.action} ${actions.ngrok.restrict_ips.matched_cidr}',
                },
              },
            ],
          },
        ],
      },
      'http',
    );
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() }))).toMatchObject({
      body: 'allow 203.0.113.0/24',
    });
  });
});

describe('variables and macros of ngrok reference', () => {
  const respondWith = (body: string, expressions: string[] = []) =>
    bindPolicy(
      oneRule('on_http_request', [{ type: 'custom-response', config: { body } }], expressions),
      'http',
    ).runner;
  const bodyOf = (body: string, req = request(), expressions: string[] = []) => {
    const d = sync(respondWith(body, expressions).onHttpRequest({ conn: CONN_TLS13, req }));
    return d.kind === 'respond' ? d.body : `(${d.kind})`;
  };

  it('req.cookies, getReqCookie and hasReqCookie', () => {
    const req = request({
      headers: { ...SAMPLE_REQUEST.headers, cookie: 'session=abc; theme="dark"; session=def' },
    });
    expect(
      bodyOf(
        "${req.cookies['session'][1].value} ${getReqCookie('theme').value} ${req.cookies['session'][0].name}",
        req,
        ["hasReqCookie('session')", "!hasReqCookie('nope')", "'theme' in req.cookies"],
      ),
    ).toBe('def dark session');
  });

  it('req.cookies and req.user_agent read the headers as earlier rules changed them', () => {
    const { runner } = bindPolicy(
      {
        on_http_request: [
          {
            expressions: ["req.cookies['session'][0].value == 'abc'", '!req.user_agent.is_bot'],
            actions: [{ type: 'set-vars', config: { vars: { read: 'yes' } } }],
          },
          {
            actions: [
              {
                type: 'add-headers',
                config: { headers: { cookie: 'session=xyz', 'user-agent': 'Googlebot/2.1' } },
              },
            ],
          },
          {
            expressions: ["req.cookies['session'][1].value == 'xyz'", 'req.user_agent.is_bot'],
            actions: [{ type: 'custom-response', config: { body: 'seen' } }],
          },
        ],
      },
      'http',
    );
    const req = request({ headers: { ...SAMPLE_REQUEST.headers, cookie: 'session=abc' } });
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req }))).toMatchObject({
      kind: 'respond',
      body: 'seen',
    });
  });

  it('req.user_agent: the browser, the OS and is_bot (ngrok examples: Edge users, bots denied)', () => {
    const edge =
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91';
    const req = request({ headers: { ...SAMPLE_REQUEST.headers, 'user-agent': edge } });
    expect(
      bodyOf('${req.user_agent.name} ${req.user_agent.major} ${req.user_agent.os_name}', req, [
        "req.user_agent.name == 'Edge'",
        '!req.user_agent.is_bot',
      ]),
    ).toBe('Edge 120 Windows');
    const bot = request({
      headers: {
        ...SAMPLE_REQUEST.headers,
        'user-agent': 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
      },
    });
    expect(bodyOf('bot', bot, ['req.user_agent.is_bot'])).toBe('bot');
  });

  it('rand.double() and rand.int(min, max) stay in range (A/B split example)', () => {
    const runner = respondWith('${rand.int(3, 5)}', [
      'rand.double() >= 0.0 && rand.double() < 1.0',
    ]);
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const d = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() }));
      if (d.kind === 'respond') seen.add(d.body);
    }
    expect([...seen].sort()).toEqual(['3', '4', '5']);
    expect(bodyOf('${rand.int(5, 3)}')).toBe('');
  });

  it('timestamp(time.now), conn.ts.start, req.ts.header_received and the time functions', () => {
    expect(
      bodyOf('${conn.ts.start.getFullYear()}', request(), [
        'timestamp(time.now) >= conn.ts.start',
        "time.now - req.ts.header_received < duration('1h')",
        "timestamp('2025-01-01T00:00:00Z') == conn.ts.start",
      ]),
    ).toBe('2025');
  });

  it('b64, base64, basic_auth, json and string macros', () => {
    expect(
      bodyOf(
        "${b64.encode('hi')} ${b64.decode('aGk=')} ${basic_auth.encode('username', 'password1')} ${json.encode({'a': [1, 2]})} ${'a b'.escapeUrl()}",
        request(),
        [
          "json.decode('{\"n\": 2}')['n'] == 2",
          "'aGk='.decodeBase64() == 'hi'",
          "base64.encode(base64.decode('aGk=')) == 'aGk='",
          "'{}'.isJson() && !'{'.isJson()",
        ],
      ),
    ).toBe('aGk= hi Basic dXNlcm5hbWU6cGFzc3dvcmQx {"a":[1,2]} a%20b');
  });

  it('refuses an unknown namespace or function at save, naming the macros', () => {
    expect(() =>
      compilePolicy(
        JSON.stringify(oneRule('on_http_request', [{ type: 'deny' }], ['rnd.double() < 0.5'])),
        {
          protocol: 'http',
        },
      ),
    ).toThrow(/the macros rand, b64, base64, basic_auth, json/);
  });
});

describe('actions.ngrok.* of the other actions', () => {
  it('add_headers, log, rate_limit and compress say what they did', () => {
    const { runner } = bindPolicy(
      {
        on_http_request: [
          {
            actions: [
              { type: 'add-headers', config: { headers: { 'x-tier': 'gold' } } },
              { type: 'log', config: { metadata: { message: 'seen', ip: '${conn.client_ip}' } } },
              {
                type: 'rate-limit',
                config: { capacity: 5, rate: '60s', bucket_key: ['conn.client_ip'] },
              },
            ],
          },
          {
            actions: [
              {
                type: 'add-headers',
                config: {
                  headers: {
                    'x-results':
                      "${actions.ngrok.add_headers.headers_added['x-tier']} ${actions.ngrok.log.metadata.ip} ${actions.ngrok.rate_limit.bucket_key} ${actions.ngrok.rate_limit.limited}",
                  },
                },
              },
            ],
          },
        ],
        on_http_response: [
          { actions: [{ type: 'compress-response' }] },
          {
            actions: [
              {
                type: 'add-headers',
                config: {
                  headers: {
                    'x-compress':
                      '${actions.ngrok.compress.negotiated_algorithm} ${actions.ngrok.compress.already_compressed}',
                  },
                },
              },
            ],
          },
        ],
      },
      'http',
    );
    const req = request({ headers: { ...SAMPLE_REQUEST.headers, 'accept-encoding': 'gzip' } });
    const d = sync(runner.onHttpRequest({ conn: CONN_TLS13, req }));
    if (d.kind !== 'continue') throw new Error(d.kind);
    expect(d.headers.add).toContainEqual(['x-results', 'gold 203.0.113.7 203.0.113.7 false']);
    const r = sync(
      runner.onHttpResponse({
        conn: CONN_TLS13,
        req,
        res: { status_code: 200, headers: { 'content-type': 'text/html' } },
        vars: d.vars,
      }),
    );
    if (r.kind !== 'continue') throw new Error(r.kind);
    expect(r.headers.add).toContainEqual(['x-compress', 'gzip false']);
  });
});
