import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { optionRules } from '../edge/binds/bind-option-rules.js';
import { mergePolicy } from '../policy/option-rules-merge.js';
import { compilePolicy, type PolicyRule } from '../policy/index.js';
import {
  addEndpointFlags,
  endpointTrafficPolicy,
  flagRules,
  hostHeaderRewrite,
  type EndpointFlags,
  type TunnelProto,
} from './endpoint-flags.js';

const http = (flags: EndpointFlags) => flagRules(flags, 'http');
const deny403 = { type: 'deny', config: { status_code: 403 } };

/** The flags commander parses from `argv` (after `burrow <proto> 3000`). */
function parse(proto: TunnelProto, argv: string[]): EndpointFlags {
  const cmd = new Command(proto)
    .exitOverride()
    .configureOutput({ writeErr: () => undefined })
    .argument('<target>');
  addEndpointFlags(cmd, proto);
  cmd.parse(['3000', ...argv], { from: 'user' });
  return cmd.opts();
}

/** The actions and expressions of rules, without their names. */
const shapes = (rules: PolicyRule[]) =>
  rules.map(({ expressions, actions }) => ({ expressions, actions }));

describe('endpoint flags as traffic policy rules', () => {
  it('--basic-auth (repeatable) → one basic-auth rule with every credential', () => {
    const flags = parse('http', [
      '--basic-auth',
      'ops:correct-horse',
      '--basic-auth',
      'dev:battery-staple',
    ]);
    expect(flags.basicAuth).toEqual(['ops:correct-horse', 'dev:battery-staple']);
    expect(http(flags).on_http_request).toEqual([
      {
        name: '--basic-auth',
        expressions: [],
        actions: [
          {
            type: 'basic-auth',
            config: { credentials: ['ops:correct-horse', 'dev:battery-staple'] },
          },
        ],
      },
    ]);
  });

  it('--cidr-allow / --cidr-deny → restrict-ips, in on_http_request for http, on_tcp_connect for tcp and tls', () => {
    const argv = [
      '--cidr-allow',
      '10.0.0.0/8',
      '--cidr-allow',
      '192.0.2.0/24,2001:db8::/32',
      '--cidr-deny',
      '10.1.0.0/16',
    ];
    const restrict = {
      name: '--cidr-allow, --cidr-deny',
      expressions: [],
      actions: [
        {
          type: 'restrict-ips',
          config: { allow: ['10.0.0.0/8', '192.0.2.0/24', '2001:db8::/32'], deny: ['10.1.0.0/16'] },
        },
      ],
    };
    expect(http(parse('http', argv))).toEqual({
      on_tcp_connect: [],
      on_http_request: [restrict],
      on_http_response: [],
    });
    for (const proto of ['tcp', 'tls'] as const) {
      expect(flagRules(parse(proto, argv), proto)).toEqual({
        on_tcp_connect: [restrict],
        on_http_request: [],
        on_http_response: [],
      });
    }
    expect(http({ cidrDeny: ['127.0.0.0/8'] }).on_http_request[0]).toEqual({
      name: '--cidr-deny',
      expressions: [],
      actions: [{ type: 'restrict-ips', config: { deny: ['127.0.0.0/8'] } }],
    });
  });

  it('tcp and tls take only the CIDR flags', () => {
    expect(() => parse('tcp', ['--basic-auth', 'ops:correct-horse'])).toThrow(
      /unknown option '--basic-auth'/,
    );
    expect(() => parse('tls', ['--compression'])).toThrow(/unknown option '--compression'/);
  });

  it('header flags → remove-headers then add-headers, on requests and on responses', () => {
    const flags = parse('http', [
      '--request-header-add',
      'X-Env: dev',
      '--request-header-add',
      'x-team:a:b',
      '--request-header-add',
      'x-literal:${not.a.variable}',
      '--request-header-remove',
      'x-secret',
      '--response-header-add',
      'x-served-by:burrow',
      '--response-header-remove',
      'server',
      '--response-header-remove',
      'x-powered-by',
    ]);
    expect(http(flags)).toEqual({
      on_tcp_connect: [],
      on_http_request: [
        {
          name: '--request-header-remove',
          expressions: [],
          actions: [{ type: 'remove-headers', config: { headers: ['x-secret'] } }],
        },
        {
          name: '--request-header-add',
          expressions: [],
          actions: [
            {
              type: 'add-headers',
              config: {
                headers: { 'x-env': 'dev', 'x-team': 'a:b', 'x-literal': '$${not.a.variable}' },
              },
            },
          ],
        },
      ],
      on_http_response: [
        {
          name: '--response-header-remove',
          expressions: [],
          actions: [{ type: 'remove-headers', config: { headers: ['server', 'x-powered-by'] } }],
        },
        {
          name: '--response-header-add',
          expressions: [],
          actions: [{ type: 'add-headers', config: { headers: { 'x-served-by': 'burrow' } } }],
        },
      ],
    });
  });

  it('a header added twice keeps both values (a second add-headers), and 10 go in one action', () => {
    const rules = http({ requestHeaderAdd: ['x-a:1', 'x-a:2'] }).on_http_request;
    expect(rules[0]!.actions).toEqual([
      { type: 'add-headers', config: { headers: { 'x-a': '1' } } },
      { type: 'add-headers', config: { headers: { 'x-a': '2' } } },
    ]);
    const eleven = Array.from({ length: 11 }, (_, i) => `x-h${i}:v`);
    const actions = http({ requestHeaderAdd: eleven }).on_http_request[0]!.actions;
    expect(actions.map((a) => Object.keys(a.config!.headers as object).length)).toEqual([10, 1]);
  });

  it('--compression → compress-response; --circuit-breaker → circuit-breaker', () => {
    expect(http(parse('http', ['--compression', '--circuit-breaker', '0.25']))).toEqual({
      on_tcp_connect: [],
      on_http_request: [
        {
          name: '--circuit-breaker',
          expressions: [],
          actions: [{ type: 'circuit-breaker', config: { error_threshold: 0.25 } }],
        },
      ],
      on_http_response: [
        {
          name: '--compression',
          expressions: [],
          actions: [{ type: 'compress-response', config: null }],
        },
      ],
    });
  });

  it('--ua-filter-allow / --ua-filter-deny → a deny rule on the user agent', () => {
    expect(
      http({ uaFilterAllow: ['^curl/'], uaFilterDeny: ['bot', '"x"'] }).on_http_request,
    ).toEqual([
      {
        name: '--ua-filter-allow, --ua-filter-deny',
        expressions: [
          `!getReqHeader('user-agent').exists(ua, ua.matches("^curl/"))`,
          `getReqHeader('user-agent').exists(ua, ua.matches("bot") || ua.matches("\\"x\\""))`,
        ],
        actions: [deny403],
      },
    ]);
  });

  it('--verify-webhook with --verify-webhook-secret → verify-webhook', () => {
    expect(
      http({ verifyWebhook: 'github', verifyWebhookSecret: 's3cret' }).on_http_request,
    ).toEqual([
      {
        name: '--verify-webhook',
        expressions: [],
        actions: [{ type: 'verify-webhook', config: { provider: 'github', secret: 's3cret' } }],
      },
    ]);
  });

  it('--oauth and its options → oauth, then a deny rule for identities not allowed (document only)', () => {
    const flags = parse('http', [
      '--oauth',
      'google',
      '--oauth-client-id',
      'app-id',
      '--oauth-client-secret',
      'app-secret',
      '--oauth-scope',
      'openid',
      '--oauth-scope',
      'email,profile',
      '--oauth-allow-email',
      'Alan@Example.com',
      '--oauth-allow-email',
      'ada@example.org',
      '--oauth-allow-domain',
      'example.net',
    ]);
    expect(http(flags).on_http_request).toEqual([
      {
        name: '--oauth',
        expressions: [],
        actions: [
          {
            type: 'oauth',
            config: {
              provider: 'google',
              client_id: 'app-id',
              client_secret: 'app-secret',
              scopes: ['openid', 'email', 'profile'],
            },
          },
        ],
      },
      {
        name: '--oauth-allow-email, --oauth-allow-domain',
        expressions: [
          '!(actions.ngrok.oauth.identity.email.lowerAscii() in ["alan@example.com", "ada@example.org"] || actions.ngrok.oauth.identity.email.lowerAscii().endsWith("@example.net"))',
        ],
        actions: [deny403],
      },
    ]);
    // Without allow lists, any identity the provider logs in passes: no deny rule.
    expect(
      http({ oauth: 'github', oauthClientId: 'a', oauthClientSecret: 'b' }).on_http_request,
    ).toEqual([
      {
        name: '--oauth',
        expressions: [],
        actions: [
          { type: 'oauth', config: { provider: 'github', client_id: 'a', client_secret: 'b' } },
        ],
      },
    ]);
  });

  it('--oidc and its options → openid-connect, then a deny rule (document only)', () => {
    const rules = http({
      oidc: 'https://id.example.com',
      oidcClientId: 'app',
      oidcClientSecret: 'secret',
      oidcScope: ['groups'],
      oidcAllowDomain: ['@Example.COM'],
    }).on_http_request;
    expect(rules).toEqual([
      {
        name: '--oidc',
        expressions: [],
        actions: [
          {
            type: 'openid-connect',
            config: {
              issuer_url: 'https://id.example.com',
              client_id: 'app',
              client_secret: 'secret',
              scopes: ['groups'],
            },
          },
        ],
      },
      {
        name: '--oidc-allow-domain',
        expressions: ['!(actions.ngrok.oidc.identity.email.lowerAscii().endsWith("@example.com"))'],
        actions: [deny403],
      },
    ]);
  });

  it('puts the OpenID Connect login before the OAuth one; the allow-list rule compiles on its own', () => {
    const rules = http({
      oauth: 'github',
      oauthClientId: 'a',
      oauthClientSecret: 'b',
      oauthAllowEmail: ['x@example.com'],
      oidc: 'https://id.example.com',
      oidcClientId: 'c',
      oidcClientSecret: 'd',
    }).on_http_request;
    expect(rules.map((r) => r.name)).toEqual(['--oidc', '--oauth', '--oauth-allow-email']);
    expect(() =>
      compilePolicy(JSON.stringify({ on_http_request: [rules[2]] }), { protocol: 'https' }),
    ).not.toThrow();
  });

  it('orders the rules as the edge orders the SDK bind options, with the same actions', () => {
    const flags: EndpointFlags = {
      cidrAllow: ['10.0.0.0/8'],
      uaFilterDeny: ['bot'],
      circuitBreaker: '0.5',
      verifyWebhook: 'github',
      verifyWebhookSecret: 's',
      basicAuth: ['ops:correct-horse'],
      requestHeaderRemove: ['x-a'],
      requestHeaderAdd: ['x-b:1'],
      responseHeaderRemove: ['server'],
      responseHeaderAdd: ['x-c:2'],
      compression: true,
    };
    expect(http(flags).on_http_request.map((r) => r.name)).toEqual([
      '--cidr-allow',
      '--ua-filter-deny',
      '--circuit-breaker',
      '--verify-webhook',
      '--basic-auth',
      '--request-header-remove',
      '--request-header-add',
    ]);
    const sdk = optionRules(
      {
        IPRestriction: { allow_cidrs: ['10.0.0.0/8'] },
        UserAgentFilter: { deny: ['bot'] },
        CircuitBreaker: { error_threshold: 0.5 },
        WebhookVerification: { provider: 'github', secret: 's' },
        BasicAuth: { credentials: [{ username: 'ops', cleartext_password: 'correct-horse' }] },
        RequestHeaders: { remove: ['x-a'], add: ['x-b:1'] },
        ResponseHeaders: { remove: ['server'], add: ['x-c:2'] },
        Compression: true,
      },
      undefined,
      'https',
    )!;
    const flat = (rules: PolicyRule[]) =>
      rules.flatMap((r) => shapes([r]).map((s) => [s.expressions, s.actions]));
    const actionsOf = (rules: PolicyRule[]) =>
      flat(rules).flatMap(([e, a]) => (a as unknown[]).map((x) => [e, x]));
    expect(actionsOf(http(flags).on_http_request)).toEqual(actionsOf(sdk.on_http_request));
    expect(actionsOf(http(flags).on_http_response)).toEqual(actionsOf(sdk.on_http_response));
    expect(shapes(flagRules({ cidrDeny: ['10.0.0.0/8'] }, 'tcp').on_tcp_connect)).toEqual(
      shapes(
        optionRules({ IPRestriction: { deny_cidrs: ['10.0.0.0/8'] } }, undefined, 'tcp')!
          .on_tcp_connect,
      ),
    );
  });

  it('no flags → no rules, and the policy file text is sent unchanged', () => {
    expect(http(parse('http', []))).toEqual({
      on_tcp_connect: [],
      on_http_request: [],
      on_http_response: [],
    });
    const file = { path: 'p.yml', text: 'on_http_request:\n  - actions: [{type: deny}]\n' };
    expect(endpointTrafficPolicy(parse('http', []), 'http', file)).toBe(file.text);
    expect(endpointTrafficPolicy({}, 'tcp', undefined)).toBeUndefined();
  });

  it('--host-header rewrite → the HostHeaderRewrite bind option, not a rule', () => {
    const flags = parse('http', ['--host-header', 'rewrite']);
    expect(flags.hostHeader).toBe('rewrite');
    expect(hostHeaderRewrite(flags.hostHeader)).toBe(true);
    expect(hostHeaderRewrite(undefined)).toBe(false);
    expect(endpointTrafficPolicy(flags, 'http', undefined)).toBeUndefined();
  });
});

describe('merging with --policy-file', () => {
  it('puts the flag rules before the file rules, phase by phase, in either document form', () => {
    const text = [
      'on_http_request:',
      '  - name: file rule',
      '    expressions: ["req.url.path == \'/admin\'"]',
      '    actions: [{type: deny, config: {status_code: 404}}]',
      'on_http_response:',
      '  - actions: [{type: add-headers, config: {headers: {x-file: "1"}}}]',
    ].join('\n');
    const merged = endpointTrafficPolicy(
      { basicAuth: ['ops:correct-horse'], responseHeaderAdd: ['x-flag:1'] },
      'http',
      { path: 'p.yml', text },
    )!;
    expect(JSON.parse(merged)).toEqual({
      on_http_request: [
        {
          name: '--basic-auth',
          expressions: [],
          actions: [{ type: 'basic-auth', config: { credentials: ['ops:correct-horse'] } }],
        },
        {
          name: 'file rule',
          expressions: ["req.url.path == '/admin'"],
          actions: [{ type: 'deny', config: { status_code: 404 } }],
        },
      ],
      on_http_response: [
        {
          name: '--response-header-add',
          expressions: [],
          actions: [{ type: 'add-headers', config: { headers: { 'x-flag': '1' } } }],
        },
        {
          expressions: [],
          actions: [{ type: 'add-headers', config: { headers: { 'x-file': '1' } } }],
        },
      ],
    });
    expect(() => compilePolicy(merged, { protocol: 'https' })).not.toThrow();

    const legacy = '{"inbound":[{"actions":[{"type":"close-connection"}]}]}';
    expect(mergePolicy(flagRules({ cidrDeny: ['10.0.0.0/8'] }, 'tcp'), legacy, 'tcp', 'f')).toEqual(
      {
        on_tcp_connect: [
          {
            name: '--cidr-deny',
            expressions: [],
            actions: [{ type: 'restrict-ips', config: { deny: ['10.0.0.0/8'] } }],
          },
          { expressions: [], actions: [{ type: 'close-connection', config: null }] },
        ],
      },
    );
  });

  it('names the policy file when it is the file that is wrong', () => {
    expect(() =>
      endpointTrafficPolicy({ cidrDeny: ['10.0.0.0/8'] }, 'http', {
        path: 'p.yml',
        text: 'on_http_request: [{actions: [{type: nope}]}]',
      }),
    ).toThrow(/^--policy-file p\.yml: .*nope/);
  });
});

describe('bad flags fail before connecting, naming the flag', () => {
  const cases: Array<[string, EndpointFlags, RegExp]> = [
    [
      'a bad CIDR',
      { cidrAllow: ['10.0.0.300/8'] },
      /^--cidr-allow: "10\.0\.0\.300\/8" is not a CIDR block/,
    ],
    [
      'an address without mask',
      { cidrDeny: ['10.1.2.3'] },
      /^--cidr-deny: "10\.1\.2\.3" is an address.*10\.1\.2\.3\/32/,
    ],
    [
      'a host address with a mask',
      { cidrDeny: ['10.1.2.3/8'] },
      /^--cidr-deny: .*did you mean 10\.0\.0\.0\/8\?/,
    ],
    [
      'a short password',
      { basicAuth: ['ops:short'] },
      /^--basic-auth: the password of user "ops" must have 8 to 128 characters/,
    ],
    [
      'credentials without colon',
      { basicAuth: ['opscorrect-horse'] },
      /^--basic-auth: must be "user:password"/,
    ],
    [
      'a header without colon',
      { requestHeaderAdd: ['x-env'] },
      /^--request-header-add: "x-env" is not "name:value"/,
    ],
    [
      'a response header without colon',
      { responseHeaderAdd: ['x-env=dev'] },
      /^--response-header-add: "x-env=dev" is not "name:value"/,
    ],
    [
      'a ratio above 1',
      { circuitBreaker: '1.5' },
      /^--circuit-breaker: .*above 0 and at most 1.*"1\.5"/,
    ],
    ['a ratio of 0', { circuitBreaker: '0' }, /^--circuit-breaker: /],
    ['a ratio that is not a number', { circuitBreaker: 'half' }, /^--circuit-breaker: /],
    [
      '--oauth without client id',
      { oauth: 'google', oauthClientSecret: 's' },
      /^--oauth: needs --oauth-client-id/,
    ],
    [
      '--oauth without client secret',
      { oauth: 'google', oauthClientId: 'a' },
      /^--oauth: needs --oauth-client-secret/,
    ],
    [
      '--oauth-allow-email without --oauth',
      { oauthAllowEmail: ['a@b.c'] },
      /^--oauth-allow-email: needs --oauth <provider>/,
    ],
    [
      '--oidc without client id',
      { oidc: 'https://id.example.com' },
      /^--oidc: needs --oidc-client-id/,
    ],
    [
      '--oidc-client-id without --oidc',
      { oidcClientId: 'x' },
      /^--oidc-client-id: needs --oidc <issuer-url>/,
    ],
    [
      '--verify-webhook without secret',
      { verifyWebhook: 'github' },
      /^--verify-webhook: needs --verify-webhook-secret/,
    ],
    [
      'a secret without --verify-webhook',
      { verifyWebhookSecret: 's' },
      /^--verify-webhook-secret: needs --verify-webhook/,
    ],
    [
      '--host-header with a literal host',
      { hostHeader: 'example.com' },
      /^--host-header: "example\.com" is not supported: only "rewrite"/,
    ],
  ];
  it.each(cases)('%s', (_what, flags, message) => {
    expect(() => endpointTrafficPolicy(flags, 'http', undefined)).toThrow(message);
  });

  it('lets the policy engine judge the rest, with the flag in front', () => {
    expect(() =>
      endpointTrafficPolicy({ requestHeaderAdd: ['bad name:1'] }, 'http', undefined),
    ).toThrow(/^--request-header-add: .*rule 0 \("--request-header-add"\).*not a header name/);
    expect(() =>
      endpointTrafficPolicy({ requestHeaderRemove: ['host'] }, 'http', undefined),
    ).toThrow(/^--request-header-remove: .*cannot remove 'host'/);
    expect(() => endpointTrafficPolicy({ uaFilterDeny: ['(unclosed'] }, 'http', undefined)).toThrow(
      /^--ua-filter-deny: /,
    );
    expect(() =>
      endpointTrafficPolicy(
        { verifyWebhook: 'nosuch', verifyWebhookSecret: 's' },
        'http',
        undefined,
      ),
    ).toThrow(/^--verify-webhook: .*provider.*must be one of/);
  });

  it('validates and sends a document the engine runs', () => {
    const text = endpointTrafficPolicy(
      {
        basicAuth: ['ops:correct-horse'],
        requestHeaderAdd: ['x-env:dev'],
        cidrDeny: ['127.0.0.0/8'],
      },
      'http',
      undefined,
    )!;
    expect(JSON.parse(text)).toEqual({
      on_http_request: [
        {
          name: '--cidr-deny',
          expressions: [],
          actions: [{ type: 'restrict-ips', config: { deny: ['127.0.0.0/8'] } }],
        },
        {
          name: '--basic-auth',
          expressions: [],
          actions: [{ type: 'basic-auth', config: { credentials: ['ops:correct-horse'] } }],
        },
        {
          name: '--request-header-add',
          expressions: [],
          actions: [{ type: 'add-headers', config: { headers: { 'x-env': 'dev' } } }],
        },
      ],
    });
  });
});
