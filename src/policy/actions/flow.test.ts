import { describe, expect, it } from 'vitest';
import {
  bindPolicy,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
  sync,
} from '../../../test/support/policy-fixtures.js';
import { requestDecision } from '../../../test/support/policy-runs.js';
import { rewriteTarget } from './url-rewrite.js';

describe('log', () => {
  it('records interpolated metadata at any depth, in every phase', () => {
    const log = {
      type: 'log',
      config: {
        metadata: {
          message: '${req.method} ${req.url.path}',
          nested: { ip: '${conn.client_ip}', n: 1 },
          list: ['${res.status_code}'],
        },
      },
    };
    const { runner, events, owner } = bindPolicy(oneRule('on_http_response', [log]), 'http');
    sync(runner.onHttpResponse({ conn: CONN_TLS13, req: SAMPLE_REQUEST, res: SAMPLE_RESPONSE }));
    expect(events.eventsFor(owner)[0]).toMatchObject({
      phase: 'on_http_response',
      outcome: 'log',
      message: 'POST /api/v1/users/42',
      metadata: {
        message: 'POST /api/v1/users/42',
        nested: { ip: '203.0.113.7', n: 1 },
        list: ['404'],
      },
    });
  });

  it('records a failed interpolation as an error and logs the rest', () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [
        { type: 'log', config: { metadata: { token: "${req.headers['x-token'][0]}" } } },
      ]),
      'http',
    );
    sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    const [logged, error] = events.eventsFor(owner);
    expect(logged).toMatchObject({
      outcome: 'log',
      message: 'log action',
      metadata: { token: '' },
    });
    expect(error).toMatchObject({ outcome: 'error', action: { index: 0, type: 'log' } });
  });
});

describe('set-vars', () => {
  it('sets strings (interpolated), ints, lists and maps for later expressions', () => {
    const { runner } = bindPolicy(
      {
        on_tcp_connect: [
          {
            actions: [
              {
                type: 'set-vars',
                config: {
                  vars: [{ ip: '${conn.client_ip}' }, { n: 3 }, { ok: true }, { tags: ['a'] }],
                },
              },
            ],
          },
          {
            expressions: [
              "vars.ip == '203.0.113.7' && vars.n + 1 == 4 && vars.ok && vars.tags == ['a']",
            ],
            actions: [{ type: 'deny' }],
          },
        ],
      },
      'tcp',
    );
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS13 }))).toEqual({
      kind: 'close',
      vars: { ip: '203.0.113.7', n: 3n, ok: true, tags: ['a'] },
    });
  });
});

describe('url-rewrite', () => {
  const rewrite = (from: string, to: string) =>
    requestDecision([{ type: 'url-rewrite', config: { from, to } }]);

  it('replaces the first match in the URL and gives the new path and query', () => {
    expect(rewrite('/users/([0-9]+)', '/people/$1')).toMatchObject({
      kind: 'continue',
      rewrite: '/api/v1/people/42?page=2&page=3',
    });
    expect(rewrite('\\?.*$', '?from=${req.method}')).toMatchObject({
      rewrite: '/api/v1/users/42?from=POST',
    });
  });

  it('keeps the host when the rewritten URL names another one', () => {
    expect(
      rewrite('^https://app\\.example\\.com/api/v1', 'https://elsewhere.test/v1'),
    ).toMatchObject({
      rewrite: '/v1/users/42?page=2&page=3',
    });
  });

  it('changes nothing when from does not match', () => {
    expect(rewrite('/nothing', '/x')).toMatchObject({ kind: 'continue', rewrite: undefined });
  });

  it('reads rewritten URLs as targets', () => {
    expect(rewriteTarget('/a?b')).toBe('/a?b');
    expect(rewriteTarget('http://h/a/b?c=1')).toBe('/a/b?c=1');
    expect(rewriteTarget('not a url')).toBeUndefined();
  });
});
