import {
  configureEgress,
  parseEgressAllow,
  type EgressAllowEntry,
} from '../../src/core/egress-guard.js';
import { compilePolicy } from '../../src/policy/compile.js';
import { PolicyEventLog } from '../../src/policy/events.js';
import type { PolicyPhase, PolicyProtocol } from '../../src/policy/parse.js';
import type { PolicyRunner, PolicyRunnerOptions } from '../../src/policy/runner.js';
import { parsePolicyDocument, toPhases } from '../../src/policy/parse.js';
import type { ConnInput, RequestInput, ResponseInput } from '../../src/policy/variables.js';

/**
 * Policies and traffic shared by the policy tests, the differential test (which evaluates every
 * expression found here with a second CEL engine) and the benchmark.
 */

/** The TLS-edge sample of the API docs (docs/api/edges.md): older form, PascalCase names. */
export const TLS_SAMPLE_POLICY = JSON.stringify({
  inbound: [
    {
      name: 'AllowTLS1.3',
      expressions: ['conn.TLS.Version.contains("1.3")'],
      actions: [
        {
          type: 'log',
          config: {
            metadata: {
              message: 'Invalid TLS Version',
              edgeId: 'edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52',
            },
          },
        },
        { type: 'deny' },
      ],
    },
  ],
  outbound: [],
});

/** The same sample in the phase form with snake_case names (the Oct 2024 docs). */
export const TLS_SAMPLE_POLICY_PHASES = `
on_tcp_connect:
  - name: AllowTLS1.3
    expressions: ["conn.tls.version.contains('1.3')"]
    actions:
      - type: log
        config:
          metadata: {message: Invalid TLS Version, edgeId: edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52}
      - type: deny
`;

/** The TCP sample: older form, `conn.ClientIP`. */
export const TCP_SAMPLE_POLICY =
  '{"inbound":[{"name":"Block IP","expressions":["conn.ClientIP == \\"192.0.2.0\\""],"actions":[{"type":"deny"}]}],"outbound":[]}';

/** The device agent's default (test.json of the current guide). */
export const DEVICE_AGENT_DEFAULT_POLICY = JSON.stringify({
  on_http_request: [],
  on_http_response: [
    {
      expressions: [],
      name: 'Add headers to requests',
      actions: [{ type: 'add-headers', config: { headers: { 'is-ngrok': '0000000000' } } }],
    },
  ],
});

/** Ten rules mixing expressions and actions: the benchmark's policy and a realistic one to test. */
export const TEN_RULE_HTTP_POLICY = `
on_http_request:
  - name: block bots
    expressions: ["getReqHeader('user-agent').exists(v, v.contains('bot'))"]
    actions: [{type: deny}]
  - name: admin only from the office
    expressions: ["req.url.path.startsWith('/admin')", "!inCidrRange(conn.client_ip, '10.0.0.0/8')"]
    actions: [{type: deny, config: {status_code: 404}}]
  - name: no trace
    expressions: ["req.method == 'TRACE'"]
    actions: [{type: custom-response, config: {status_code: 405, body: "\${req.method} is not allowed"}}]
  - name: old docs
    actions:
      - type: redirect
        config: {from: '^https?://[^/]+/docs/v1/(.*)$', to: '/docs/v2/$1', status_code: 301}
  - name: api v1 is v2
    expressions: ["req.url.path.matches('^/api/v1/')"]
    actions: [{type: url-rewrite, config: {from: '/api/v1/', to: '/api/v2/'}}]
  - name: tag
    actions:
      - type: add-headers
        config: {headers: {x-client-ip: "\${conn.client_ip}", x-path: "\${req.url.path}"}}
  - name: strip internals
    expressions: ["hasReqHeader('x-internal-secret')"]
    actions: [{type: remove-headers, config: {headers: [x-internal-secret]}}]
  - name: per client
    actions:
      - type: rate-limit
        config: {name: per client, capacity: 1000000000, rate: 60s, bucket_key: [conn.client_ip]}
  - name: known bad networks
    expressions: ["conn.client_port > 0"]
    actions: [{type: restrict-ips, config: {deny: [192.0.2.0/24, '2001:db8::/32']}}]
  - name: debug requests
    expressions: ["hasQueryParam('debug')", "getQueryParam('debug')[0] == 'true'"]
    actions: [{type: log, config: {metadata: {message: "debug from \${conn.client_ip}"}}}]
on_http_response:
  - name: hide server
    expressions: ["res.status_code < 500"]
    actions: [{type: remove-headers, config: {headers: [server]}}]
`;

/** The expressions `sources`, each tagged with `phase`. */
function inPhase(
  phase: PolicyPhase,
  sources: string[],
): Array<{ source: string; phase: PolicyPhase }> {
  return sources.map((source) => ({ source, phase }));
}

/** Expressions exercised by the tests beyond those in the policies above, with their phase. */
export const EXTRA_EXPRESSIONS: ReadonlyArray<{ source: string; phase: PolicyPhase }> = [
  ...inPhase('on_tcp_connect', [
    "conn.client_ip == '203.0.113.7'",
    'conn.ClientIP == "203.0.113.7"',
    'conn.client_port == 51234',
    'conn.ClientPort > 1024 && conn.ServerPort == 443',
    "conn.tls.version == '1.3'",
    "conn.tls.sni == 'app.example.com'",
    'conn.TLS.SNI.endsWith(".example.com")',
    "conn.tls.cipher_suite.startsWith('TLS_')",
    "conn.geo.country_code == ''",
    'conn.Geo.CountryCode == conn.geo.country_code',
    "conn.client_ip in ['::1', '203.0.113.7']",
    'conn.ts.start < time.now',
    "conn.server_ip.matches('^127\\\\.')",
    "endpoint.host == 'app.example.com' && endpoint.port == 443",
    "'tier' in vars && vars.tier == 'gold'",
  ]),
  ...inPhase('on_http_request', [
    "req.method == 'POST'",
    "req.Method == 'POST'",
    "req.url.path == '/api/v1/users/42'",
    "req.URL.Path.startsWith('/api')",
    "req.url.query == 'page=2&page=3'",
    "req.url.query_params['page'] == ['2', '3']",
    "req.url.host == 'app.example.com' && req.url.scheme == 'https'",
    "req.host == 'app.example.com'",
    "req.headers['user-agent'][0].contains('curl')",
    "'x-forwarded-for' in req.headers",
    "req.Headers['User-Agent'][0] == req.headers['user-agent'][0]",
    "size(req.headers['accept']) == 2",
    "req.content_type == 'application/json' && req.content_length == 17",
    "getReqHeader('X-Forwarded-For').size() == 1",
    "req.headers.exists(k, k.startsWith('x-'))",
    "getQueryParam('page').all(p, p.matches('^[0-9]+$'))",
    "inCidrRanges(conn.client_ip, ['198.51.100.0/24', '203.0.113.0/24'])",
    "req.url.path.matches('^/api/v[0-9]+/users/[0-9]+$')",
    "req.url == 'https://app.example.com/api/v1/users/42?page=2&page=3'",
    "req.URL.contains('/users/')",
  ]),
  ...inPhase('on_http_response', [
    'res.status_code >= 400 && res.status_code < 500',
    'res.StatusCode == 404',
    "getResHeader('content-type')[0].startsWith('text/html')",
    "res.content_type == 'text/html' && hasResHeader('server')",
    'res.headers.size() == 3',
  ]),
];

/** A client connection over TLS 1.3 (as Node reports it). */
export const CONN_TLS13: ConnInput = {
  client_ip: '203.0.113.7',
  client_port: 51234,
  server_ip: '127.0.0.1',
  server_port: 443,
  ts: { start: Date.parse('2025-01-01T00:00:00Z') },
  tls: { version: 'TLSv1.3', sni: 'app.example.com', cipher_suite: 'TLS_AES_128_GCM_SHA256' },
};

/** The same client over TLS 1.2. */
export const CONN_TLS12: ConnInput = {
  ...CONN_TLS13,
  tls: { ...CONN_TLS13.tls, version: 'TLSv1.2' },
};

/** A request with repeated query parameters and headers. */
export const SAMPLE_REQUEST: RequestInput = {
  method: 'POST',
  url: '/api/v1/users/42?page=2&page=3',
  scheme: 'https',
  headers: {
    host: 'app.example.com',
    'user-agent': 'curl/8.5.0',
    'x-forwarded-for': '198.51.100.1',
    accept: ['application/json', 'text/plain'],
    'content-type': 'application/json; charset=utf-8',
    'content-length': '17',
  },
};

export const SAMPLE_RESPONSE: ResponseInput = {
  status_code: 404,
  headers: { 'content-type': 'text/html; charset=utf-8', server: 'upstream/1.0', 'x-a': '1' },
};

/** Every fixture policy with the protocol it is written for. */
export const FIXTURE_POLICIES: ReadonlyArray<{
  name: string;
  text: string;
  protocol: PolicyProtocol;
}> = [
  { name: 'TLS sample', text: TLS_SAMPLE_POLICY, protocol: 'tls' },
  { name: 'TLS sample (phases)', text: TLS_SAMPLE_POLICY_PHASES, protocol: 'tls' },
  { name: 'TCP sample', text: TCP_SAMPLE_POLICY, protocol: 'tcp' },
  { name: 'device agent default', text: DEVICE_AGENT_DEFAULT_POLICY, protocol: 'http' },
  { name: 'ten rules', text: TEN_RULE_HTTP_POLICY, protocol: 'http' },
];

/** `${...}` interpolations in a config value, at any depth. */
function interpolations(value: unknown, out: string[]): void {
  if (typeof value === 'string') {
    for (const m of value.matchAll(/\$\{([^}]*)\}/g)) out.push(m[1]!.trim());
  } else if (Array.isArray(value)) {
    for (const v of value) interpolations(v, out);
  } else if (value && typeof value === 'object') {
    for (const v of Object.values(value)) interpolations(v, out);
  }
}

/**
 * Every expression of the fixtures: rule expressions, `${}` interpolations, rate-limit bucket
 * keys, and {@link EXTRA_EXPRESSIONS}, each with the phase it runs in.
 */
export function fixtureExpressions(): Array<{ source: string; phase: PolicyPhase }> {
  const out: Array<{ source: string; phase: PolicyPhase }> = [...EXTRA_EXPRESSIONS];
  for (const { text, protocol } of FIXTURE_POLICIES) {
    const phases = toPhases(parsePolicyDocument(text, 'fixture'), protocol);
    for (const [phase, rules] of Object.entries(phases) as Array<
      [PolicyPhase, (typeof phases)[PolicyPhase]]
    >) {
      for (const rule of rules) {
        for (const source of rule.expressions) out.push({ source, phase });
        for (const action of rule.actions) {
          const found: string[] = [];
          interpolations(action.config, found);
          const keys = action.config?.bucket_key;
          if (Array.isArray(keys)) found.push(...keys.map(String));
          for (const source of found) out.push({ source, phase });
        }
      }
    }
  }
  return out;
}

/**
 * `value`, asserting it is not a promise (phases without ip_policies answer synchronously).
 * @example const decision = sync(runner.onTcpConnect({ conn }));
 */
export function sync<T>(value: T | Promise<T>): T {
  if (value instanceof Promise) throw new Error('expected a synchronous decision');
  return value;
}

/** A runner for `policy` (an object is sent as JSON) with an event log to inspect. */
export function bindPolicy(
  policy: unknown,
  protocol: PolicyProtocol,
  options: Omit<PolicyRunnerOptions, 'ownerId' | 'events'> = {},
): { runner: PolicyRunner; events: PolicyEventLog; owner: string } {
  const text = typeof policy === 'string' ? policy : JSON.stringify(policy);
  const events = new PolicyEventLog();
  const owner = 'edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52';
  const runner = compilePolicy(text, { protocol }).bind({ ownerId: owner, events, ...options });
  return { runner, events, owner };
}

/** One rule in `phase` with `actions` (and optional expressions), as a phase-form document. */
export function oneRule(
  phase: PolicyPhase,
  actions: unknown[],
  expressions: string[] = [],
): Record<string, unknown> {
  return { [phase]: [{ name: 'rule', expressions, actions }] };
}

/**
 * `--egress-allow 127.0.0.1`: for tests whose key sets, identity providers or services listen on
 * loopback, which the egress guard refuses by default. Undo it with {@link refuseInternalEgress}.
 */
export function allowLoopbackEgress(): void {
  configureEgress({ allow: [parseEgressAllow('127.0.0.1') as EgressAllowEntry] });
}

/** The egress guard's default again: no internal address allowed. */
export function refuseInternalEgress(): void {
  configureEgress({ allow: [] });
}
