import { describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import { FIXTURE_POLICIES } from '../../test/support/policy-fixtures.js';
import type { PolicyProtocol } from './parse.js';
import { validatePolicy } from './validate.js';

const FIELD = 'traffic_policy.value';

/** The error validating `policy` (an object, sent as JSON) for `protocol` gives. */
function refusal(policy: unknown, protocol: PolicyProtocol = 'http'): ValidationError {
  try {
    validatePolicy(typeof policy === 'string' ? policy : JSON.stringify(policy), protocol, FIELD);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(policy)} to be refused on ${protocol}`);
}

const request = (...actions: unknown[]) => ({
  on_http_request: [{ name: 'r', expressions: [], actions }],
});

describe('validatePolicy accepts', () => {
  it.each(FIXTURE_POLICIES.map((f) => [f.name, f]))('the %s fixture', (_name, fixture) => {
    expect(() => validatePolicy(fixture.text, fixture.protocol, FIELD)).not.toThrow();
  });

  it('the legacy inbound/outbound form on HTTP, and inbound on TCP and TLS', () => {
    const legacy = {
      inbound: [{ actions: [{ type: 'deny' }] }],
      outbound: [{ actions: [{ type: 'add-headers', config: { headers: { a: 'b' } } }] }],
    };
    expect(() => validatePolicy(JSON.stringify(legacy), 'http', FIELD)).not.toThrow();
    expect(() => validatePolicy(JSON.stringify(legacy), 'https', FIELD)).not.toThrow();
    const tcp = { inbound: legacy.inbound, outbound: [] };
    expect(() => validatePolicy(JSON.stringify(tcp), 'tcp', FIELD)).not.toThrow();
    expect(() => validatePolicy(JSON.stringify(tcp), 'tls', FIELD)).not.toThrow();
  });
});

describe('validatePolicy refuses, naming phase, rule, action and fix', () => {
  it('a bad expression (2200), naming the expression and the column', () => {
    const err = refusal({
      on_tcp_connect: [
        {
          name: 'Block IP',
          expressions: ["conn.clientip == '1.2.3.4'"],
          actions: [{ type: 'deny' }],
        },
      ],
    });
    expect(err.code).toBe('ERR_NGROK_2200');
    expect(err.statusCode).toBe(400);
    expect(err.field).toBe(FIELD);
    expect(err.message).toBe(
      `${FIELD}: phase on_tcp_connect, rule 0 ("Block IP"): expressions[0] "conn.clientip == '1.2.3.4'" is not a valid expression: No such key: clientip (column 6); see docs/traffic-policy.md for the fields of conn, req, res, endpoint and time`,
    );
  });

  it('a bad expression in a legacy document, naming the phase it maps to', () => {
    const err = refusal(
      { inbound: [{ expressions: ['conn.TLS.Version.contains('], actions: [{ type: 'deny' }] }] },
      'tls',
    );
    expect(err.code).toBe('ERR_NGROK_2200');
    expect(err.message).toMatch(
      /^traffic_policy\.value: phase on_tcp_connect \(from inbound\), rule 0: expressions\[0\]/,
    );
  });

  it('a bad interpolation or bucket key in a config (2200), naming the key', () => {
    const header = refusal(
      request({ type: 'add-headers', config: { headers: { 'x-a': '${conn.nope}' } } }),
    );
    expect(header.code).toBe('ERR_NGROK_2200');
    expect(header.message).toMatch(
      /phase on_http_request, rule 0 \("r"\), action 0 \(add-headers\): config\.headers\.x-a "\$\{conn\.nope\}" is not a valid expression/,
    );
    const key = refusal(
      request({
        type: 'rate-limit',
        config: { capacity: 5, rate: '60s', bucket_key: ['req.nope'] },
      }),
    );
    expect(key.code).toBe('ERR_NGROK_2200');
    expect(key.message).toMatch(/action 0 \(rate-limit\): config\.bucket_key\[0\] "req\.nope"/);
  });

  it('an unknown action type (2201), suggesting the closest one', () => {
    const typo = refusal(request({ type: 'add-header', config: { headers: { a: 'b' } } }));
    expect(typo.code).toBe('ERR_NGROK_2201');
    expect(typo.message).toMatch(
      /action 0 \(add-header\): unknown action type 'add-header'; did you mean 'add-headers'\? The supported types are: add-headers, basic-auth,/,
    );
    const unsupported = refusal(request({ type: 'saml', config: {} }));
    expect(unsupported.code).toBe('ERR_NGROK_2201');
    expect(unsupported.message).toMatch(
      /action type 'saml' is not supported by Burrow\. The supported types/,
    );
  });

  it('an action in a phase it does not run in (2202)', () => {
    const err = refusal({ on_http_response: [{ name: 'x', actions: [{ type: 'deny' }] }] });
    expect(err.code).toBe('ERR_NGROK_2202');
    expect(err.message).toBe(
      `${FIELD}: phase on_http_response, rule 0 ("x"), action 0 (deny): Action type deny is not supported for on_http_response; it runs in on_tcp_connect, on_http_request. Move it to a rule there.`,
    );
  });

  it('config of the wrong shape or with unknown keys (2203), naming the key', () => {
    const shape = refusal(request({ type: 'add-headers', config: { headers: ['x-a: 1'] } }));
    expect(shape.code).toBe('ERR_NGROK_2203');
    expect(shape.message).toMatch(
      /action 0 \(add-headers\): config\.headers must be a mapping of names to values, not a list$/,
    );
    const unknown = refusal(request({ type: 'deny', config: { status: 403 } }));
    expect(unknown.code).toBe('ERR_NGROK_2203');
    expect(unknown.message).toMatch(
      /action 0 \(deny\): unknown config key 'status'; this action takes status_code$/,
    );
    const none = refusal(request({ type: 'close-connection', config: { now: true } }));
    expect(none.message).toMatch(/this action takes no config/);
    const type = refusal(request({ type: 'deny', config: { status_code: '403' } }));
    expect(type.code).toBe('ERR_NGROK_2203');
    expect(type.message).toMatch(/config\.status_code must be an integer, not a string \("403"\)/);
  });

  it.each([
    [
      'deny status out of range',
      { type: 'deny', config: { status_code: 200 } },
      /config\.status_code must be from 400 to 599, not 200/,
    ],
    [
      'a required key missing',
      { type: 'add-headers', config: {} },
      /config\.headers is required: a mapping of 1 to 10 entries, e.g\. \{"x-burrow": "1"\}/,
    ],
    [
      'too many headers',
      {
        type: 'add-headers',
        config: {
          headers: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`x-${i}`, 'v'])),
        },
      },
      /config\.headers must have 1 to 10 entries, not 11/,
    ],
    [
      'a framing header',
      { type: 'add-headers', config: { headers: { 'Content-Length': '1' } } },
      /cannot add 'content-length'/,
    ],
    [
      'the Trailer framing header',
      { type: 'remove-headers', config: { headers: ['Trailer'] } },
      /cannot remove 'trailer'/,
    ],
    [
      'a bad header name',
      { type: 'remove-headers', config: { headers: ['x a'] } },
      /config\.headers\[0\] has "x a", which is not a header name/,
    ],
    [
      'a bad CIDR',
      { type: 'restrict-ips', config: { allow: ['10.0.0.1/8'] } },
      /config\.allow\[0\] is not the first address of its block: did you mean 10\.0\.0\.0\/8\?/,
    ],
    [
      'an address without mask',
      { type: 'restrict-ips', config: { deny: ['192.0.2.1'] } },
      /write 192\.0\.2\.1\/32/,
    ],
    [
      'an empty restriction',
      { type: 'restrict-ips', config: { allow: [] } },
      /must list at least one entry/,
    ],
    [
      'a bad IP policy id',
      { type: 'restrict-ips', config: { ip_policies: ['office'] } },
      /config\.ip_policies\[0\] must be an IP policy id like ipp_/,
    ],
    [
      'a rate off the 10s grid',
      { type: 'rate-limit', config: { capacity: 10, rate: '65s' } },
      /config\.rate must be a multiple of 10s, not 65s/,
    ],
    [
      'a rate too short',
      { type: 'rate-limit', config: { capacity: 10, rate: '30s' } },
      /config\.rate must be from 60s to 24h/,
    ],
    [
      'a rate that is no duration',
      { type: 'rate-limit', config: { capacity: 10, rate: 'minute' } },
      /must be a duration like "60s"/,
    ],
    [
      'a zero capacity',
      { type: 'rate-limit', config: { capacity: 0, rate: '60s' } },
      /config\.capacity must be from 1 to 2000000000, not 0/,
    ],
    [
      'another algorithm',
      { type: 'rate-limit', config: { capacity: 1, rate: '60s', algorithm: 'token_bucket' } },
      /must be "sliding_window"/,
    ],
    [
      'a bad regex',
      { type: 'url-rewrite', config: { from: '(', to: '/' } },
      /config\.from is not a valid regular expression \(RE2 syntax\): missing closing \)/,
    ],
    [
      'a group that does not exist',
      { type: 'url-rewrite', config: { from: '/a/(.*)', to: '/b/$2' } },
      /\$2 refers to capture group 2, but the from regex has only 1/,
    ],
    [
      'a redirect status that is no redirect',
      { type: 'redirect', config: { to: '/', status_code: 304 } },
      /must be one of 301, 302, 303, 307, 308, not 304/,
    ],
    [
      'a short password',
      { type: 'basic-auth', config: { credentials: ['alice:short'] } },
      /password of 8 to 128 characters \(user "alice"\)/,
    ],
    [
      'a credential without user',
      { type: 'basic-auth', config: { credentials: [':password123'] } },
      /must be "user:password" with a non-empty user/,
    ],
    [
      'body and content together',
      { type: 'custom-response', config: { body: 'a', content: 'b' } },
      /config\.content is the older name of body; give one of them, not both/,
    ],
    [
      'a body on a 204',
      { type: 'custom-response', config: { status_code: 204, body: 'a' } },
      /a 204 response has no body/,
    ],
    [
      'a bad variable name',
      { type: 'set-vars', config: { vars: [{ '1x': 'a' }] } },
      /config\.vars\.1x is not a variable name/,
    ],
  ])('a bad config value (2204): %s', (_what, action, message) => {
    const err = refusal(request(action));
    expect(err.code).toBe('ERR_NGROK_2204');
    expect(err.message).toMatch(
      /^traffic_policy\.value: phase on_http_request, rule 0 \("r"\), action 0 \(/,
    );
    expect(err.message).toMatch(message);
  });

  it('an unknown compression algorithm (2204), in on_http_response', () => {
    const err = refusal({
      on_http_response: [
        { actions: [{ type: 'compress-response', config: { algorithms: ['zstd'] } }] },
      ],
    });
    expect(err.code).toBe('ERR_NGROK_2204');
    expect(err.message).toMatch(
      /config\.algorithms\[0\] must be one of br, compress, deflate, gzip, not "zstd"/,
    );
  });

  it('deny with a status code where it closes connections (2204)', () => {
    const err = refusal(
      { on_tcp_connect: [{ actions: [{ type: 'deny', config: { status_code: 403 } }] }] },
      'tcp',
    );
    expect(err.code).toBe('ERR_NGROK_2204');
    expect(err.message).toMatch(
      /applies only in on_http_request; in on_tcp_connect deny closes the connection/,
    );
  });

  it('an HTTP action on a TCP or TLS endpoint (2205), listing what works there', () => {
    const err = refusal(
      {
        on_tcp_connect: [
          { name: 'tag', actions: [{ type: 'add-headers', config: { headers: { a: 'b' } } }] },
        ],
      },
      'tls',
    );
    expect(err.code).toBe('ERR_NGROK_2205');
    expect(err.message).toBe(
      `${FIELD}: phase on_tcp_connect, rule 0 ("tag"), action 0 (add-headers): action type 'add-headers' is not supported for protocol tls: it works on HTTP only (on_http_request, on_http_response). On TLS endpoints use close-connection, deny, forward-internal, log, restrict-ips, set-vars, terminate-tls.`,
    );
  });

  it('a rule without actions (2206)', () => {
    const err = refusal({
      on_http_request: [{ name: 'empty', expressions: ['true'], actions: [] }],
    });
    expect(err.code).toBe('ERR_NGROK_2206');
    expect(err.message).toMatch(
      /on_http_request\[0\] \("empty"\): actions must be a non-empty list/,
    );
  });

  it('an action after one that always ends the phase (2207)', () => {
    const err = refusal(request({ type: 'deny' }, { type: 'log' }));
    expect(err.code).toBe('ERR_NGROK_2207');
    expect(err.message).toBe(
      `${FIELD}: phase on_http_request, rule 0 ("r"), action 1 (log) can never run: action 0 (deny) before it always ends the phase. Move it before deny, or into another rule.`,
    );
    expect(refusal(request({ type: 'redirect', config: { to: '/x' } }, { type: 'log' })).code).toBe(
      'ERR_NGROK_2207',
    );
  });

  it('lets actions follow those that end the phase only sometimes', () => {
    const conditional = request(
      { type: 'redirect', config: { from: '^http://(.*)$', to: 'https://$1' } },
      { type: 'restrict-ips', config: { allow: ['10.0.0.0/8'] } },
      { type: 'rate-limit', config: { capacity: 5, rate: '60s' } },
      { type: 'basic-auth', config: { credentials: ['alice:password1'] } },
      { type: 'log' },
    );
    expect(() => validatePolicy(JSON.stringify(conditional), 'http', FIELD)).not.toThrow();
  });

  it('a phase the protocol does not run (2230), in both forms', () => {
    const phases = refusal(
      { on_http_request: [{ name: 'web', actions: [{ type: 'deny' }] }] },
      'tcp',
    );
    expect(phases.code).toBe('ERR_NGROK_2230');
    expect(phases.message).toBe(
      `${FIELD}: Invalid Traffic Policy phase on_http_request for protocol tcp: phase on_http_request, rule 0 ("web") cannot run, because a TCP endpoint only runs on_tcp_connect; move these rules to on_tcp_connect or remove them`,
    );
    const legacy = refusal({ inbound: [], outbound: [{ actions: [{ type: 'log' }] }] }, 'tls');
    expect(legacy.code).toBe('ERR_NGROK_2230');
    expect(legacy.message).toMatch(
      /phase on_http_response for protocol tls: phase on_http_response \(from outbound\), rule 0 cannot run.*remove the outbound rules/,
    );
  });

  it('an unparseable document (2236)', () => {
    expect(refusal('{"inbound": [', 'tcp').code).toBe('ERR_NGROK_2236');
  });
});
