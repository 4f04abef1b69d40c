import { describe, expect, it } from 'vitest';
import { AgentApiError } from './errors.js';
import type { StoredTunnel } from './state-file.js';
import { recordTrafficPolicy } from './tunnel-endpoints.js';
import {
  parseDomain,
  parseForwardsTo,
  parseTunnelRequest as parseAnyRequest,
  type EndpointTunnelRequest,
} from './tunnel-input.js';
import {
  checkStoredOptions,
  redactOptions,
  tunnelOptionRules,
  tunnelTrafficPolicy,
} from './tunnel-options.js';

/** The requests here are for tunnels on a domain (labeled ones: labeled-tunnels.test.ts). */
function parseTunnelRequest(body: unknown): EndpointTunnelRequest {
  return parseAnyRequest(body) as EndpointTunnelRequest;
}

function refusal(fn: () => unknown): AgentApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AgentApiError);
    return err as AgentApiError;
  }
  throw new Error('expected a refusal');
}

const ADD_HEADERS = {
  inbound: [],
  outbound: [
    {
      expressions: [],
      name: 'Add headers to requests',
      actions: [{ type: 'add-headers', config: { headers: { 'is-ngrok': '0000000000' } } }],
    },
  ],
};

describe('parseForwardsTo', () => {
  it.each([
    ['localhost:8001', 'localhost:8001'],
    [':8001', 'localhost:8001'],
    ['192.168.1.20:80', '192.168.1.20:80'],
    ['[::1]:8080', '[::1]:8080'],
    ['printer.lan:631', 'printer.lan:631'],
    [' :1 ', 'localhost:1'],
    [':65535', 'localhost:65535'],
  ])('accepts %s (connects to %s)', (value, target) => {
    expect(parseForwardsTo(value).target).toBe(target);
  });

  it.each([
    [undefined, /forwards_to: is required/],
    [8001, /must be a string <host>:<port>/],
    ['8001', /must be <host>:<port>/],
    ['localhost', /must be <host>:<port>/],
    ['localhost:0', /the port must be a number from 1 to 65535 \(got '0'\)/],
    ['localhost:65536', /from 1 to 65535 \(got '65536'\)/],
    ['localhost:http', /from 1 to 65535 \(got 'http'\)/],
    ['localhost:', /from 1 to 65535 \(got ''\)/],
    ['http://localhost:8001', /without a scheme/],
    ['[nope]:80', /'\[nope\]' is not an IPv6 address/],
    ['bad_host!:80', /'bad_host!' is not a host name or IP address/],
  ])('refuses %s with a 400 naming the field', (value, message) => {
    const err = refusal(() => parseForwardsTo(value));
    expect(err.status).toBe(400);
    expect(err.field).toBe('forwards_to');
    expect(err.code).toBe('ERR_NGROK_215');
    expect(err.message).toMatch(message);
  });
});

describe('parseDomain', () => {
  it('lower-cases hostnames and tcp addresses', () => {
    expect(parseDomain(' Device1.SiteA.burrow.test ', 'http')).toBe('device1.sitea.burrow.test');
    expect(parseDomain('TCP.burrow.test:20001', 'tcp')).toBe('tcp.burrow.test:20001');
  });

  it.each([
    ['http', undefined, /is required: a hostname under a reserved domain/],
    ['http', 42, /must be a string/],
    ['http', 'device1', /needs at least two labels/],
    ['http', '*.sitea.burrow.test', /cannot be a wildcard/],
    ['http', 'device1.sitea.burrow.test:8443', /without scheme, port or path/],
    ['http', 'https://device1.sitea.burrow.test', /without scheme, port or path/],
    ['tls', 'bad_label.burrow.test', /has a label that is not 1-63 letters/],
    ['tcp', 'tcp.burrow.test', /must be a reserved TCP address <host>:<port>/],
    ['tcp', undefined, /is required: a reserved TCP address/],
  ] as const)('refuses a %s domain %s', (protocol, value, message) => {
    const err = refusal(() => parseDomain(value, protocol));
    expect(err).toMatchObject({ status: 400, field: 'domain', code: 'ERR_NGROK_215' });
    expect(err.message).toMatch(message);
  });
});

describe('parseTunnelRequest', () => {
  it('takes the docs/device-agent.md body, protocol defaulting to http, policy to null', () => {
    expect(
      parseTunnelRequest({ forwards_to: 'localhost:8001', domain: 'device1.sitea.burrow.test' }),
    ).toEqual({
      protocol: 'http',
      forwards_to: 'localhost:8001',
      target: 'localhost:8001',
      domain: 'device1.sitea.burrow.test',
      policy: null,
    });
    const own = parseTunnelRequest({
      protocol: 'http',
      forwards_to: ':8001',
      domain: 'device1.sitea.burrow.test',
      policy: ADD_HEADERS,
    });
    expect(own.policy).toBe(ADD_HEADERS);
  });

  it('accepts tcp and tls, and policy text', () => {
    expect(
      parseTunnelRequest({ protocol: 'tcp', forwards_to: ':22', domain: 'tcp.burrow.test:20001' }),
    ).toMatchObject({ protocol: 'tcp', target: 'localhost:22' });
    expect(
      parseTunnelRequest({
        protocol: 'tls',
        forwards_to: ':443',
        domain: 'db.sitea.burrow.test',
        policy: 'on_tcp_connect:\n  - actions: [{type: deny}]\n',
      }).policy,
    ).toContain('deny');
  });

  it.each([
    [null, 400, 'ERR_NGROK_215', undefined, /the body must be a JSON object/],
    [[1], 400, 'ERR_NGROK_215', undefined, /the body must be a JSON object/],
    [
      { forwards_to: ':1', domain: 'a.b.c', url: 'x' },
      400,
      'ERR_NGROK_214',
      'url',
      /unknown field 'url'/,
    ],
    [
      { protocol: 'udp', forwards_to: ':1', domain: 'a.b.c' },
      400,
      'ERR_NGROK_215',
      'protocol',
      /one of http, tcp, tls/,
    ],
    [{ domain: 'a.b.c' }, 400, 'ERR_NGROK_215', 'forwards_to', /is required/],
    [{ forwards_to: ':1' }, 400, 'ERR_NGROK_215', 'domain', /is required/],
    [
      { forwards_to: ':1', domain: 'a.b.c', policy: [1] },
      400,
      'ERR_NGROK_215',
      'policy',
      /must be a policy object/,
    ],
    [
      {
        forwards_to: ':1',
        domain: 'a.b.c',
        policy: { inbound: [{ actions: [{ type: 'teleport' }] }] },
      },
      400,
      'ERR_NGROK_2201',
      'policy',
      /unknown action type 'teleport'/,
    ],
    [
      {
        forwards_to: ':1',
        domain: 'a.b.c',
        policy: { inbound: [{ expressions: ['req.method =='], actions: [{ type: 'deny' }] }] },
      },
      400,
      'ERR_NGROK_2200',
      'policy',
      /inbound/,
    ],
    [
      { protocol: 'tcp', forwards_to: ':1', domain: 'tcp.burrow.test:20001', policy: ADD_HEADERS },
      400,
      'ERR_NGROK_2230',
      'policy',
      /TCP endpoint only runs on_tcp_connect/,
    ],
    [
      { forwards_to: ':1', domain: 'a.b.c', policy: { rules: [] } },
      400,
      'ERR_NGROK_2236',
      'policy',
      /unknown top-level key 'rules'/,
    ],
  ])('refuses %j', (body, status, code, field, message) => {
    const err = refusal(() => parseTunnelRequest(body));
    expect(err).toMatchObject({ status, code, field });
    expect(err.message).toMatch(message);
    expect(err.body()).toEqual({ error: err.message, code, ...(field ? { field } : {}) });
  });
});

describe('endpoint options (basic_auth, ip_restriction, …)', () => {
  const http = { forwards_to: ':8001', domain: 'device1.sitea.burrow.test' };
  const tcp = { protocol: 'tcp', forwards_to: ':22', domain: 'tcp.burrow.test:20001' };

  it('accepts every option on http and keeps them as given', () => {
    const options = {
      basic_auth: ['ops:correct-horse'],
      ip_restriction: { allow_cidrs: ['10.0.0.0/8'], deny_cidrs: ['10.1.0.0/16'] },
      request_header: { add: ['x-env:dev'], remove: ['x-secret'] },
      response_header: { add: ['x-served-by:burrow'], remove: ['server'] },
      compression: true,
      circuit_breaker: 0.5,
      user_agent_filter: { allow: ['^curl/'], deny: ['bot'] },
      webhook_verification: { provider: 'github', secret: 'whsec' },
      oauth: {
        provider: 'google',
        client_id: 'app',
        client_secret: 'app-secret',
        scopes: ['email'],
        allow_emails: ['a@example.com'],
        allow_domains: ['example.org'],
      },
      oidc: { issuer_url: 'https://id.example.com', client_id: 'c', client_secret: 'oidc-secret' },
    };
    const request = parseTunnelRequest({ ...http, ...options });
    expect(request.options).toEqual(options);
    expect(request.policy).toBeNull();
    // The same rules as the matching `burrow http` flags, named after the fields, in the same order.
    const rules = tunnelOptionRules(options, 'http');
    expect(rules.on_http_request.map((r) => r.name)).toEqual([
      'ip_restriction.allow_cidrs, ip_restriction.deny_cidrs',
      'user_agent_filter.allow, user_agent_filter.deny',
      'circuit_breaker',
      'webhook_verification',
      'basic_auth',
      'oidc',
      'oauth',
      'oauth.allow_emails, oauth.allow_domains',
      'request_header.remove',
      'request_header.add',
    ]);
    expect(rules.on_http_response.map((r) => r.name)).toEqual([
      'response_header.remove',
      'response_header.add',
      'compression',
    ]);
    expect(parseTunnelRequest(http).options).toBeUndefined();
    expect(parseTunnelRequest({ ...http, basic_auth: null, oauth: null }).options).toBeUndefined();
  });

  it('takes ip_restriction on tcp and tls, in on_tcp_connect', () => {
    const request = parseTunnelRequest({ ...tcp, ip_restriction: { deny_cidrs: ['10.0.0.0/8'] } });
    expect(tunnelOptionRules(request.options!, 'tcp').on_tcp_connect).toEqual([
      {
        name: 'ip_restriction.deny_cidrs',
        expressions: [],
        actions: [{ type: 'restrict-ips', config: { deny: ['10.0.0.0/8'] } }],
      },
    ]);
  });

  it('puts the option rules before the tunnel policy', () => {
    const policy = { on_http_request: [{ name: 'mine', actions: [{ type: 'deny' }] }] };
    const text = tunnelTrafficPolicy(
      { basic_auth: ['ops:correct-horse'], request_header: { add: ['x-env:dev'] } },
      'http',
      { field: 'policy', value: policy },
    )!;
    expect(JSON.parse(text).on_http_request.map((r: { name?: string }) => r.name)).toEqual([
      'basic_auth',
      'request_header.add',
      'mine',
    ]);
    // Without options the policy goes as it is.
    expect(tunnelTrafficPolicy(undefined, 'http', { field: 'policy', value: policy })).toBe(
      JSON.stringify(policy),
    );
  });

  it('puts the option rules before the default policy of a tunnel without its own', () => {
    const record: StoredTunnel = {
      url: 'https://device1.sitea.burrow.test',
      url_part: 'device1.sitea.burrow.test',
      protocol: 'http',
      forwards_to: ':8001',
      domain: 'device1.sitea.burrow.test',
      policy: null,
      options: { basic_auth: ['ops:correct-horse'] },
      created_at: '2026-01-01T00:00:00.000Z',
    };
    const defaults = { path: 'test.json', json: JSON.stringify(ADD_HEADERS), unusableOn: {} };
    expect(JSON.parse(recordTrafficPolicy(record, defaults)!)).toEqual({
      on_http_request: [
        {
          name: 'basic_auth',
          expressions: [],
          actions: [{ type: 'basic-auth', config: { credentials: ['ops:correct-horse'] } }],
        },
      ],
      on_http_response: ADD_HEADERS.outbound,
    });
    const { options: _options, ...plain } = record;
    expect(recordTrafficPolicy(plain, defaults)).toBe(JSON.stringify(ADD_HEADERS));
    expect(recordTrafficPolicy(plain, undefined)).toBeUndefined();
  });

  it.each([
    [
      { basic_auth: ['ops:short'] },
      'ERR_NGROK_215',
      'basic_auth[0]',
      /^basic_auth\[0\]: the password of user "ops" must have 8 to 128 characters/,
    ],
    [
      { basic_auth: ['ops:correct-horse', 'nocolon'] },
      'ERR_NGROK_215',
      'basic_auth[1]',
      /^basic_auth\[1\]: must be "user:password"/,
    ],
    [
      { basic_auth: 'ops:correct-horse' },
      'ERR_NGROK_215',
      'basic_auth',
      /must be a list of credentials/,
    ],
    [{ basic_auth: [7] }, 'ERR_NGROK_215', 'basic_auth[0]', /must be a non-empty string/],
    [
      { ip_restriction: { allow_cidrs: ['10.0.0.0/8', '10.1.2.3'] } },
      'ERR_NGROK_215',
      'ip_restriction.allow_cidrs[1]',
      /"10\.1\.2\.3" is an address.*10\.1\.2\.3\/32/,
    ],
    [
      { ip_restriction: { allow: ['10.0.0.0/8'] } },
      'ERR_NGROK_214',
      'ip_restriction.allow',
      /unknown field 'ip_restriction\.allow'; ip_restriction has the fields allow_cidrs, deny_cidrs/,
    ],
    [{ ip_restriction: ['10.0.0.0/8'] }, 'ERR_NGROK_215', 'ip_restriction', /must be an object/],
    [
      { request_header: { add: ['x-env'] } },
      'ERR_NGROK_215',
      'request_header.add[0]',
      /"x-env" is not "name:value" \(e\.g\. "x-env:dev"\)/,
    ],
    [
      { request_header: { add: ['bad name:1'] } },
      undefined,
      'request_header.add',
      /^request_header\.add: .*not a header name/,
    ],
    [
      { response_header: { remove: ['ok', ' '] } },
      'ERR_NGROK_215',
      'response_header.remove[1]',
      /must be a non-empty string: header name$/,
    ],
    [{ compression: 'yes' }, 'ERR_NGROK_215', 'compression', /must be true or false/],
    [{ circuit_breaker: '0.5' }, 'ERR_NGROK_215', 'circuit_breaker', /must be a number/],
    [{ circuit_breaker: 1.5 }, 'ERR_NGROK_215', 'circuit_breaker', /above 0 and at most 1.*"1\.5"/],
    [
      { user_agent_filter: { deny: ['(unclosed'] } },
      undefined,
      'user_agent_filter.deny',
      /^user_agent_filter\.deny: /,
    ],
    [
      { webhook_verification: { provider: 'github' } },
      'ERR_NGROK_215',
      'webhook_verification.secret',
      /is required: the webhook signing secret/,
    ],
    [
      { webhook_verification: { provider: 'nosuch', secret: 's' } },
      undefined,
      'webhook_verification',
      /provider.*must be one of/,
    ],
    [
      { oauth: { provider: 'google', client_id: 'a' } },
      'ERR_NGROK_215',
      'oauth.client_secret',
      /^oauth\.client_secret: is required/,
    ],
    [
      { oauth: { client_id: 'a', client_secret: 'b' } },
      'ERR_NGROK_215',
      'oauth.provider',
      /is required: the OAuth provider/,
    ],
    [
      {
        oidc: {
          issuer_url: 'https://id.example.com',
          client_id: 'a',
          client_secret: 'b',
          allow_emails: 'a@b.c',
        },
      },
      'ERR_NGROK_215',
      'oidc.allow_emails',
      /must be a list of email addresses/,
    ],
    [
      { oidc: { issuer_url: 'x', client_id: 'a', client_secret: 'b', audience: 'y' } },
      'ERR_NGROK_214',
      'oidc.audience',
      /unknown field 'oidc\.audience'/,
    ],
  ])('refuses %j naming the field', (options, code, field, message) => {
    const err = refusal(() => parseTunnelRequest({ ...http, ...options }));
    expect(err.status).toBe(400);
    expect(err.field).toBe(field);
    if (code !== undefined) expect(err.code).toBe(code);
    else expect(err.code).toMatch(/^ERR_NGROK_22\d\d$/);
    expect(err.message).toMatch(message);
  });

  it('refuses the http options on tcp and tls, and still refuses unknown fields', () => {
    const err = refusal(() => parseTunnelRequest({ ...tcp, basic_auth: ['ops:correct-horse'] }));
    expect(err).toMatchObject({ status: 400, code: 'ERR_NGROK_215', field: 'basic_auth' });
    expect(err.message).toMatch(
      /applies to http tunnels only; a tcp tunnel takes ip_restriction alone/,
    );
    const unknown = refusal(() => parseTunnelRequest({ ...http, host_header: 'rewrite' }));
    expect(unknown).toMatchObject({ status: 400, code: 'ERR_NGROK_214', field: 'host_header' });
    expect(unknown.message).toMatch(/a tunnel has the fields protocol, .*basic_auth, .*oidc/);
  });

  it('checks the options merged before the policy with the engine', () => {
    const err = refusal(() =>
      parseTunnelRequest({
        ...http,
        request_header: { add: ['x-a:1'] },
        policy: { inbound: [{ actions: [{ type: 'teleport' }] }] },
      }),
    );
    expect(err).toMatchObject({ status: 400, code: 'ERR_NGROK_2201', field: 'policy' });
  });

  it('shows the options without secrets', () => {
    const options = {
      basic_auth: ['ops:correct-horse', 'dev:battery-staple'],
      webhook_verification: { provider: 'github', secret: 'whsec' },
      oauth: { provider: 'google', client_id: 'app', client_secret: 'app-secret' },
      oidc: { issuer_url: 'https://id.example.com', client_id: 'c', client_secret: 'oidc-secret' },
      compression: true,
    };
    const shown = redactOptions(options);
    expect(shown).toEqual({
      basic_auth: ['ops:[redacted]', 'dev:[redacted]'],
      webhook_verification: { provider: 'github', secret: '[redacted]' },
      oauth: { provider: 'google', client_id: 'app', client_secret: '[redacted]' },
      oidc: { issuer_url: 'https://id.example.com', client_id: 'c', client_secret: '[redacted]' },
      compression: true,
    });
    expect(JSON.stringify(shown)).not.toMatch(/correct-horse|battery|whsec|app-secret|oidc-secret/);
    expect(options.basic_auth[0]).toBe('ops:correct-horse');
  });

  it('checks stored options as a create request', () => {
    expect(checkStoredOptions(undefined, 'http')).toBeUndefined();
    expect(checkStoredOptions({ compression: true }, 'http')).toEqual({ compression: true });
    expect(() => checkStoredOptions({ basic_auth: ['x:y'] }, 'http')).toThrow(/^basic_auth\[0\]/);
    expect(() => checkStoredOptions({ nope: 1 }, 'http')).toThrow(/unknown field 'options\.nope'/);
  });
});
