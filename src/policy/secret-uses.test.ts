import { describe, expect, it } from 'vitest';
import { bindPolicy, oneRule, sync } from '../../test/support/policy-fixtures.js';
import { aclReadsVault, parseAcl, type AclRule } from '../core/acl.js';
import { ValidationError } from '../core/errors.js';
import { compilePolicy } from './compile.js';
import { celToString } from './cel-types.js';
import { secretEquals, SecretText, ungrantedSecretRead, type SecretsLookup } from './secrets.js';

/** The value every test secret has, so that a leak of it, or of its length (16), shows. */
const VALUE = 'S3cr3t-0123-4567';
const SECRETS: SecretsLookup = {
  get: (vault, name) => (vault === 'prod' && name === 'oidc' ? VALUE : undefined),
  redact: (text) => text.replaceAll(VALUE, '[secret]'),
};
const SECRET = "secrets.get('prod', 'oidc')";
const REQUEST = { method: 'GET', url: '/', headers: { host: 'a.burrow.test' } };

function refusal(policy: unknown, protocol: 'http' | 'tcp' = 'http'): ValidationError {
  try {
    compilePolicy(JSON.stringify(policy), { protocol });
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error('the policy was accepted');
}

const log = (metadata: Record<string, unknown>) => ({ type: 'log', config: { metadata } });

describe('where a policy may use a secret (checked when it is saved or bound)', () => {
  it.each([
    ['its size in a log', [log({ n: `\${size(${SECRET})}` })], [], /size\(\)/],
    ['a regex over it', [log({ m: 'x' })], [`${SECRET}.matches('^S3')`], /matches\(\)/],
    ['a prefix test', [{ type: 'deny' }], [`${SECRET}.startsWith('S')`], /startsWith\(\)/],
    [
      'concatenation',
      [{ type: 'deny' }],
      [`${SECRET} + 'x' == 'y'`],
      /\(\+\)|may only be used whole/,
    ],
    ['membership', [{ type: 'deny' }], [`${SECRET} in ['a']`], /may only be used whole/],
    [
      'a computed vault',
      [{ type: 'deny' }],
      ["secrets.get(req.url.path, 'oidc') == 'x'"],
      /two string literals/,
    ],
    [
      'secrets on its own',
      [{ type: 'deny' }],
      ['[secrets].size() == 1'],
      /may only be used as secrets.get/,
    ],
    [
      'placed whole in a log',
      [log({ v: `\${${SECRET}}` })],
      [],
      /config\.metadata\.v places secrets\.get\("prod", "oidc"\)/,
    ],
    [
      'placed in set-vars',
      [{ type: 'set-vars', config: { vars: [{ v: `\${${SECRET}}` }] } }],
      [],
      /config\.vars\.v places/,
    ],
    [
      'placed in a redirect',
      [{ type: 'redirect', config: { to: `/x?\${${SECRET}}` } }],
      [],
      /config\.to places/,
    ],
    [
      'placed in a url-rewrite',
      [{ type: 'url-rewrite', config: { from: '/', to: `/\${${SECRET}}` } }],
      [],
      /config\.to places/,
    ],
    [
      'a rate-limit bucket key',
      [
        {
          type: 'rate-limit',
          config: { algorithm: 'sliding_window', capacity: 1, rate: '60s', bucket_key: [SECRET] },
        },
      ],
      [],
      /config\.bucket_key\[0\] places/,
    ],
  ])('refuses %s, naming the rule and the vault', (_what, actions, expressions, message) => {
    const err = refusal(oneRule('on_http_request', actions, expressions));
    expect(err.code).toBe('ERR_NGROK_2200');
    expect(err.message).toMatch(/phase on_http_request, rule 0 \("rule"\)/);
    expect(err.message).toMatch(message);
  });

  it('accepts a secret placed whole in what the policy sends, or compared whole', () => {
    const policy = compilePolicy(
      JSON.stringify({
        on_http_request: [
          {
            name: 'key',
            expressions: [`req.headers['x-key'][0] != ${SECRET}`],
            actions: [{ type: 'custom-response', config: { status_code: 401, body: 'no' } }],
          },
          {
            actions: [
              {
                type: 'add-headers',
                config: { headers: { authorization: `Bearer \${${SECRET}}` } },
              },
              log({ matched: `\${req.headers['x-key'][0] == ${SECRET}}` }),
            ],
          },
        ],
        on_http_response: [
          {
            actions: [
              {
                type: 'custom-response',
                config: { body: `\${${SECRET}}`, headers: { 'x-s': `\${${SECRET}}` } },
              },
            ],
          },
        ],
      }),
      { protocol: 'http' },
    );
    expect(policy.secretReads.map((r) => r.where)).toEqual([
      'phase on_http_request, rule 0 ("key"), expressions[0]',
      'phase on_http_request, rule 1, action 0 (add-headers), config.headers.authorization',
      'phase on_http_request, rule 1, action 1 (log), config.metadata.matched',
      'phase on_http_response, rule 0, action 0 (custom-response), config.body',
      'phase on_http_response, rule 0, action 0 (custom-response), config.headers.x-s',
    ]);
    expect(new Set(policy.secretReads.map((r) => `${r.vault}/${r.name}`))).toEqual(
      new Set(['prod/oidc']),
    );
  });
});

describe('comparing with a secret', () => {
  it.each([
    [`req.headers['x-key'][0] == ${SECRET}`, VALUE, true],
    [`${SECRET} == req.headers['x-key'][0]`, VALUE, true],
    [`${SECRET} != req.headers['x-key'][0]`, VALUE, false],
    [`req.headers['x-key'][0] == ${SECRET}`, VALUE.slice(0, -1), false],
    [`req.headers['x-key'][0] == ${SECRET}`, `${VALUE}x`, false],
  ])('%s with the client sending %s matches: %s', (expression, sent, matches) => {
    const { runner } = bindPolicy(
      oneRule('on_http_request', [{ type: 'deny' }], [expression]),
      'http',
      {
        secrets: SECRETS,
      },
    );
    const req = { ...REQUEST, headers: { ...REQUEST.headers, 'x-key': sent } };
    const decision = sync(runner.onHttpRequest({ conn: { client_ip: '192.0.2.1' }, req }));
    expect(decision.kind === 'respond').toBe(matches);
  });

  it('gives a value of its own type: no string function, conversion or JSON reads it', () => {
    for (const source of [
      `size(${SECRET}) > 0`,
      `string(${SECRET}) == 'x'`,
      `dyn(${SECRET}) == 'x'`,
    ]) {
      expect(() =>
        compilePolicy(JSON.stringify(oneRule('on_http_request', [{ type: 'deny' }], [source])), {
          protocol: 'http',
        }),
      ).toThrow(/may only be used whole/);
    }
    const secret = new SecretText(VALUE);
    expect(JSON.stringify({ secret })).toBe('{"secret":"[secret]"}');
    expect(`${String(secret)}`).toBe('[secret]');
    expect(celToString(secret)).toBe('[secret]');
    expect(secretEquals(secret, VALUE)).toBe(true);
    expect(secretEquals(secret, 16n)).toBe(false);
  });
});

describe('a header set from a secret', () => {
  it('goes out whole, but later rules read it as [secret], so no size or match reaches an event', () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [
        {
          type: 'add-headers',
          config: { headers: { 'x-token': `\${${SECRET}}`, 'x-plain': 'p' } },
        },
        log({
          seen: "${req.headers['x-token'][0]}",
          size: "${size(req.headers['x-token'][0])}",
          prefix: "${req.headers['x-token'][0].matches('^S3')}",
          plain: "${req.headers['x-plain'][0]}",
        }),
      ]),
      'http',
      { secrets: SECRETS },
    );
    const decision = sync(runner.onHttpRequest({ conn: { client_ip: '192.0.2.1' }, req: REQUEST }));
    expect(decision).toMatchObject({
      kind: 'continue',
      headers: {
        add: [
          ['x-token', VALUE],
          ['x-plain', 'p'],
        ],
      },
    });
    const [event] = events.eventsFor(owner);
    expect(event!.metadata).toEqual({ seen: '[secret]', size: '8', prefix: 'false', plain: 'p' });
    expect(JSON.stringify(events.eventsFor(owner))).not.toContain('S3');
  });
});

describe('the grant', () => {
  function acl(...rules: string[]): AclRule[] {
    const parsed = parseAcl(rules);
    if ('error' in parsed) throw new Error(parsed.error);
    return parsed.rules;
  }
  const reads = compilePolicy(
    JSON.stringify(
      oneRule('on_http_request', [
        { type: 'custom-response', config: { body: `\${${SECRET}}\${secrets.get('dev', 'x')}` } },
      ]),
    ),
    { protocol: 'http' },
  ).secretReads;

  it('names the first vault an ACL does not grant; bind rules and * grant none', () => {
    const check = (rules: AclRule[]) => ungrantedSecretRead(reads, (v) => aclReadsVault(rules, v));
    expect(check(acl('bind:leak.example'))?.vault).toBe('prod');
    expect(check(acl('*'))?.vault).toBe('prod');
    expect(check(acl())?.vault).toBe('prod');
    expect(check(acl('secrets:read:prod'))?.vault).toBe('dev');
    expect(check(acl('secrets:read:prod', 'secrets:read:dev'))).toBeUndefined();
    expect(check(acl('secrets:read:*'))).toBeUndefined();
    expect(check(acl('secrets:read:Prod', 'secrets:read:dev'))?.vault).toBe('prod');
  });
});
