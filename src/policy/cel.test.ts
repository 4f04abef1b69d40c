import { describe, expect, it } from 'vitest';
import {
  CONN_TLS12,
  CONN_TLS13,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
} from '../../test/support/policy-fixtures.js';
import { compileExpression, EXPRESSION_LIMITS, ExpressionError, inCidrRange } from './cel.js';
import type { PolicyPhase } from './parse.js';
import {
  ConnVars,
  EndpointVars,
  normalizeTlsVersion,
  ReqVars,
  ResVars,
  TimeVars,
  type Activation,
  type ConnInput,
} from './variables.js';

const NOW = Date.parse('2025-06-01T12:00:00Z');

function activation(conn: ConnInput = CONN_TLS13, vars: Record<string, unknown> = {}): Activation {
  return {
    conn: new ConnVars(conn),
    endpoint: new EndpointVars({
      id: 'ep_1',
      host: 'app.example.com',
      port: 443,
      protocol: 'https',
    }),
    time: new TimeVars(() => NOW),
    vars,
    req: new ReqVars(SAMPLE_REQUEST),
    res: new ResVars(SAMPLE_RESPONSE),
  };
}

const evaluate = (source: string, phase: PolicyPhase = 'on_http_response', act = activation()) =>
  compileExpression(source, phase, 'value').evaluate(act);

function refusal(source: string, phase: PolicyPhase = 'on_http_response'): string {
  try {
    compileExpression(source, phase, 'condition');
  } catch (err) {
    expect(err).toBeInstanceOf(ExpressionError);
    return (err as Error).message;
  }
  throw new Error(`expected ${source} to be refused`);
}

describe('variables and their older PascalCase aliases', () => {
  it.each([
    ['conn.client_ip', 'conn.ClientIP', '203.0.113.7'],
    ['conn.client_port', 'conn.ClientPort', 51234n],
    ['conn.server_ip', 'conn.ServerIP', '127.0.0.1'],
    ['conn.server_port', 'conn.ServerPort', 443n],
    ['conn.tls.version', 'conn.TLS.Version', '1.3'],
    ['conn.tls.sni', 'conn.TLS.SNI', 'app.example.com'],
    ['conn.tls.cipher_suite', 'conn.TLS.CipherSuite', 'TLS_AES_128_GCM_SHA256'],
    ['conn.geo.country_code', 'conn.Geo.CountryCode', ''],
    ['req.method', 'req.Method', 'POST'],
    ['req.url.path', 'req.URL.Path', '/api/v1/users/42'],
    ['req.url.query', 'req.URL.RawQuery', 'page=2&page=3'],
    ['req.content_length', 'req.ContentLength', 17n],
    ['res.status_code', 'res.StatusCode', 404n],
    ['endpoint.host', 'endpoint.Host', 'app.example.com'],
  ])('%s (and %s)', (snake, pascal, expected) => {
    expect(evaluate(snake)).toEqual(expected);
    expect(evaluate(pascal)).toEqual(expected);
  });

  it('runs the TLS-edge sample expression: TLS 1.3 matches, TLS 1.2 does not', () => {
    const sample = compileExpression(
      'conn.TLS.Version.contains("1.3")',
      'on_tcp_connect',
      'condition',
    );
    expect(sample.evaluate(activation(CONN_TLS13))).toBe(true);
    expect(sample.evaluate(activation(CONN_TLS12))).toBe(false);
  });

  it('normalises TLS versions as Node reports them', () => {
    expect(normalizeTlsVersion('TLSv1.3')).toBe('1.3');
    expect(normalizeTlsVersion('TLSv1')).toBe('1.0');
    expect(normalizeTlsVersion('1.2')).toBe('1.2');
    expect(normalizeTlsVersion(undefined)).toBe('');
    expect(evaluate('conn.tls.version', 'on_tcp_connect', activation({ client_ip: '::1' }))).toBe(
      '',
    );
  });

  it('exposes headers as lower-case names to lists, and the older Headers map in canonical case', () => {
    expect(evaluate("req.headers['accept']")).toEqual(['application/json', 'text/plain']);
    expect(evaluate("req.Headers['User-Agent']")).toEqual(['curl/8.5.0']);
    expect(evaluate("'X-Forwarded-For' in req.Headers && 'x-forwarded-for' in req.headers")).toBe(
      true,
    );
    expect(evaluate("res.headers['server'][0]")).toBe('upstream/1.0');
  });

  it('reads the URL in parts, and compares req.url with strings', () => {
    expect(evaluate('req.url.host')).toBe('app.example.com');
    expect(evaluate('req.url.port')).toBe(443n);
    expect(evaluate('req.url.scheme')).toBe('https');
    expect(evaluate("req.url.query_params['page']")).toEqual(['2', '3']);
    expect(evaluate("req.url == 'https://app.example.com/api/v1/users/42?page=2&page=3'")).toBe(
      true,
    );
    expect(evaluate("req.url != 'https://app.example.com/'")).toBe(true);
    expect(evaluate("req.url.startsWith('https://app.') && req.url.contains('/users/')")).toBe(
      true,
    );
    expect(evaluate("string(req.url) + '#frag'")).toBe(
      'https://app.example.com/api/v1/users/42?page=2&page=3#frag',
    );
  });

  it('gives timestamps for time.now and conn.ts.start', () => {
    expect(evaluate('time.now')).toEqual(new Date(NOW));
    expect(evaluate("conn.ts.start == timestamp('2025-01-01T00:00:00Z')")).toBe(true);
    expect(evaluate("time.now - duration('1h') > conn.ts.start")).toBe(true);
  });

  it('reads vars set earlier', () => {
    const act = activation(CONN_TLS13, { tier: 'gold', count: 3n });
    expect(evaluate("vars.tier == 'gold' && vars.count > 2", 'on_tcp_connect', act)).toBe(true);
    expect(evaluate("'missing' in vars", 'on_tcp_connect', act)).toBe(false);
  });

  it('reads a string field path as CEL does, with CEL answering what is not a string', () => {
    // `path + ''` is not a bare path: CEL evaluates it, the reference for the direct read.
    for (const path of ['conn.client_ip', 'conn.TLS.Version', 'req.url.path', 'endpoint.host']) {
      expect(evaluate(path)).toBe(evaluate(`${path} + ''`));
    }
    const broken = activation({ client_ip: undefined as unknown as string });
    expect(() => evaluate('conn.client_ip', 'on_tcp_connect', broken)).toThrow();
    expect(() => evaluate("conn.client_ip + ''", 'on_tcp_connect', broken)).toThrow();
    const notAString = activation({ client_ip: 7 as unknown as string });
    expect(() => evaluate('conn.client_ip', 'on_tcp_connect', notAString)).toThrow(/not of type/);
  });

  it('looks a key up in a map field as CEL does, in any case for headers', () => {
    for (const key of ['content-type', 'Content-Type', 'x-none']) {
      for (const map of ['req.headers', 'req.Headers', 'res.headers', 'req.url.query_params']) {
        const direct = `'${key}' in ${map}`;
        expect([direct, evaluate(direct)]).toEqual([direct, evaluate(`(${direct}) == true`)]);
      }
    }
  });
});

describe('functions', () => {
  it('reads request and response headers without regard to case', () => {
    expect(evaluate("getReqHeader('User-Agent')")).toEqual(['curl/8.5.0']);
    expect(evaluate("getReqHeader('x-absent')")).toEqual([]);
    expect(evaluate("hasReqHeader('ACCEPT') && !hasReqHeader('cookie')")).toBe(true);
    expect(evaluate("getResHeader('Server')")).toEqual(['upstream/1.0']);
    expect(evaluate("hasResHeader('x-a')")).toBe(true);
  });

  it('reads query parameters', () => {
    expect(evaluate("getQueryParam('page')")).toEqual(['2', '3']);
    expect(evaluate("hasQueryParam('page') && !hasQueryParam('q')")).toBe(true);
  });

  it('checks CIDR ranges for IPv4, IPv6 and single addresses', () => {
    expect(evaluate("inCidrRange(conn.client_ip, '203.0.113.0/24')")).toBe(true);
    expect(evaluate("inCidrRange(conn.client_ip, '198.51.100.0/24')")).toBe(false);
    expect(evaluate("inCidrRanges(conn.client_ip, ['10.0.0.0/8', '203.0.113.7'])")).toBe(true);
    expect(inCidrRange('2001:db8::1', '2001:db8::/32')).toBe(true);
    expect(inCidrRange('::ffff:10.1.2.3', '10.0.0.0/8')).toBe(true);
    expect(inCidrRange('10.1.2.3', '2001:db8::/32')).toBe(false);
    expect(inCidrRange('not an ip', '10.0.0.0/8')).toBe(false);
    // A bare address is one host, of either family.
    expect(inCidrRange('203.0.113.7', '203.0.113.7')).toBe(true);
    expect(inCidrRange('::ffff:203.0.113.7', '203.0.113.7')).toBe(true);
    expect(inCidrRange('2001:db8::1', '2001:DB8:0::1')).toBe(true);
    expect(inCidrRange('2001:db8::1', '2001:db8::2')).toBe(false);
    expect(inCidrRange('2001:db8::1', '203.0.113.7')).toBe(false);
    expect(() => inCidrRange('203.0.113.7', 'nonsense')).toThrow(/not a CIDR block/);
    expect(() => inCidrRange('fe80::1', 'fe80::1%eth0')).toThrow(/not a CIDR block/);
  });

  it('matches with RE2 semantics (an unanchored search), in both call forms', () => {
    expect(evaluate("req.url.path.matches('users/[0-9]+')")).toBe(true);
    expect(evaluate("matches(req.url.path, '^/api/v[0-9]$')")).toBe(false);
    expect(evaluate("req.url.matches('^https://app')")).toBe(true);
    // RE2 has no backreferences; the backtracking engine cel-js ships would accept this.
    expect(refusal("req.method.matches('(a)\\\\1')")).toMatch(/invalid regular expression/);
  });

  it('defeats ReDoS: ^(a+)+$ on 100k characters answers in linear time', () => {
    const act = activation(CONN_TLS13, { input: `${'a'.repeat(100_000)}!` });
    const expr = compileExpression("vars.input.matches('^(a+)+$')", 'on_tcp_connect', 'condition');
    const started = performance.now();
    expect(expr.evaluate(act)).toBe(false);
    // A backtracking engine would not finish this in our lifetime; linear time takes milliseconds.
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('also routes patterns computed at run time through RE2', () => {
    const act = activation(CONN_TLS13, { input: `${'a'.repeat(50_000)}!`, re: '^(a+)+$' });
    const started = performance.now();
    expect(evaluate('vars.input.matches(vars.re)', 'on_tcp_connect', act)).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('compile-time checks', () => {
  it('refuses variables a phase does not have, saying where they exist', () => {
    expect(refusal("req.method == 'GET'", 'on_tcp_connect')).toMatch(
      /Unknown variable: req \(column 1\); req is only available in on_http_request and on_http_response, not in on_tcp_connect/,
    );
    expect(refusal('res.status_code == 200', 'on_http_request')).toMatch(
      /res is only available in on_http_response/,
    );
    expect(refusal("getReqHeader('a') == []", 'on_tcp_connect')).toMatch(
      /getReqHeader\(\) is only available in on_http_request and on_http_response/,
    );
    expect(refusal('request.method == "GET"')).toMatch(
      /the variables are conn, endpoint, time, vars, actions and secrets/,
    );
  });

  it('refuses unknown fields, syntax errors and type errors with a column', () => {
    expect(refusal('conn.client_addr == "x"')).toMatch(/No such key: client_addr \(column 6\)/);
    expect(refusal('conn.client_ip == ')).toMatch(/Unexpected token: EOF \(column 19\)/);
    expect(refusal('conn.client_port + "1" == 2')).toMatch(/no such overload: int \+ string/);
  });

  it('requires rule expressions to give a bool', () => {
    expect(refusal('conn.client_ip')).toMatch(/must give a bool .* this one gives string/);
    expect(() => compileExpression('conn.client_ip', 'on_tcp_connect', 'value')).not.toThrow();
  });

  it('checks literal regexes and CIDR blocks when compiling', () => {
    expect(refusal("conn.client_ip.matches('(')")).toMatch(
      /invalid regular expression \(RE2 syntax\) "\("/,
    );
    expect(refusal("inCidrRange(conn.client_ip, '10.0.0.1/8')")).toMatch(
      /invalid CIDR block "10.0.0.1\/8"/,
    );
  });

  it('enforces the parse limits', () => {
    const long = `conn.client_ip == '${'a'.repeat(EXPRESSION_LIMITS.maxLength)}'`;
    expect(refusal(long)).toMatch(/characters long; the limit is 4096/);
    const deep = `${'('.repeat(40)}true${')'.repeat(40)}`;
    expect(refusal(deep)).toMatch(/Exceeded maxDepth \(32\)/);
    const wide = `conn.client_ip in [${Array.from({ length: 300 }, (_, i) => `'${i}'`).join(',')}]`;
    expect(refusal(wide)).toMatch(/Exceeded maxListElements/);
  });

  it('bounds comprehension nesting, which multiplies work', () => {
    expect(() =>
      compileExpression('[1, 2].all(a, [3].exists(b, a < b))', 'on_tcp_connect', 'condition'),
    ).not.toThrow();
    expect(refusal('[1].all(a, [2].all(b, [3].all(c, a < b && b < c)))')).toMatch(
      /nested 3 deep at column \d+; at most 2 levels are allowed/,
    );
    expect(
      refusal("cel.bind(a, 'x', cel.bind(b, a + a, cel.bind(c, b + b, c + c))) == ''"),
    ).toMatch(/nested 3 deep/);
  });
});

describe('expression depth, bounded before anything recurses over the tree', () => {
  it.each([
    ['a run of prefix operators', `${'!'.repeat(1022)}true`, /run of more than 32/],
    ['a long binary chain', `1${' + 1'.repeat(500)} > 0`, /nests \d+ levels deep; the limit is 32/],
  ])('refuses %s', (_name, source, message) => {
    expect(() => compileExpression(source, 'on_tcp_connect', 'condition')).toThrow(message);
  });

  it('still takes ordinary expressions with a few operators', () => {
    expect(() =>
      compileExpression(
        "!!(conn.client_ip == '192.0.2.1') && -1 < 0",
        'on_tcp_connect',
        'condition',
      ),
    ).not.toThrow();
  });
});
