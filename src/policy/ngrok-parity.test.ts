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
  ];
  it.each(cases)('%s: fails %s by default', (_name, action, kind) => {
    const { runner } = bindPolicy(oneRule('on_http_request', [action], [failing]), 'http');
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: request() })).kind).toBe(kind);
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
