import { describe, expect, it } from 'vitest';
import {
  bindPolicy,
  CONN_TLS12,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
  sync,
  TCP_SAMPLE_POLICY,
  TLS_SAMPLE_POLICY,
  TLS_SAMPLE_POLICY_PHASES,
} from '../../test/support/policy-fixtures.js';
import { compilePolicy } from './compile.js';
import { NO_HEADER_CHANGES } from './headers.js';

const log = (message: string) => ({ type: 'log', config: { metadata: { message } } });

describe('on_tcp_connect', () => {
  it.each([
    ['older form, PascalCase', TLS_SAMPLE_POLICY],
    ['phase form, snake_case', TLS_SAMPLE_POLICY_PHASES],
  ])('runs the TLS sample (%s): denies TLS 1.3, lets TLS 1.2 through', (_form, text) => {
    const { runner, events, owner } = bindPolicy(text, 'tls');
    // vars carry the log action's result (actions.ngrok.log) under a symbol key only.
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS13 }))).toMatchObject({
      kind: 'close',
      vars: {},
    });
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS12 }))).toEqual({ kind: 'continue', vars: {} });
    const recorded = events.eventsFor(owner);
    expect(recorded.map((e) => [e.outcome, e.action?.type, e.message])).toEqual([
      ['denied', 'deny', 'connection denied: closed'],
      ['log', 'log', 'Invalid TLS Version'],
    ]);
    expect(recorded[1]).toMatchObject({
      owner_id: owner,
      phase: 'on_tcp_connect',
      rule: { index: 0, name: 'AllowTLS1.3' },
      action: { index: 0, type: 'log' },
      client_ip: '203.0.113.7',
      metadata: { message: 'Invalid TLS Version', edgeId: 'edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52' },
    });
  });

  it('runs the TCP sample: closes one address only', () => {
    const { runner } = bindPolicy(TCP_SAMPLE_POLICY, 'tcp');
    expect(sync(runner.onTcpConnect({ conn: { client_ip: '192.0.2.0' } })).kind).toBe('close');
    expect(sync(runner.onTcpConnect({ conn: { client_ip: '192.0.2.1' } })).kind).toBe('continue');
  });

  it('puts legacy inbound rules in on_tcp_connect for TCP and in on_http_request for HTTP', () => {
    const legacy = { inbound: [{ actions: [{ type: 'deny' }] }] };
    const tcp = bindPolicy(legacy, 'tcp').runner;
    expect(sync(tcp.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('close');
    const http = bindPolicy(legacy, 'http').runner;
    expect(sync(http.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('continue');
    expect(sync(http.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'respond',
    );
  });

  it('passes vars through unchanged when the phase has no rules', () => {
    const { runner } = bindPolicy(oneRule('on_http_request', [{ type: 'deny' }]), 'http');
    const vars = { a: 'b' };
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS13, vars })).vars).toBe(vars);
    expect(runner.policy.has('on_tcp_connect')).toBe(false);
    expect(runner.policy.has('on_http_request')).toBe(true);
  });
});

describe('rules and actions', () => {
  it('ANDs a rule expressions; no expressions always matches', () => {
    const { runner, events, owner } = bindPolicy(
      {
        on_http_request: [
          {
            name: 'both',
            expressions: ["req.method == 'POST'", "req.url.path == '/nope'"],
            actions: [log('both')],
          },
          { name: 'one', expressions: ["req.method == 'POST'"], actions: [log('one')] },
          { name: 'always', actions: [log('always')] },
        ],
      },
      'http',
    );
    sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    expect(events.eventsFor(owner).map((e) => e.message)).toEqual(['always', 'one']);
  });

  it('runs rules and actions in order, and a terminating action ends the phase', () => {
    const { runner, events, owner } = bindPolicy(
      {
        on_http_request: [
          {
            name: 'first',
            actions: [log('1'), { type: 'custom-response', config: { body: 'stop' } }],
          },
          { name: 'second', actions: [log('2')] },
        ],
      },
      'http',
    );
    const decision = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    expect(decision).toMatchObject({ kind: 'respond', status: 200, body: 'stop' });
    expect(events.eventsFor(owner).map((e) => e.outcome)).toEqual(['responded', 'log']);
  });

  it('a deny rule whose expression fails at run time fails closed, and records why', () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [{ type: 'deny' }], ["req.headers['x-token'][0] == 'secret'"]),
      'http',
    );
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'respond',
    );
    const event = events.eventsFor(owner).find((e) => e.outcome === 'error');
    expect(event).toMatchObject({ action: null, rule: { index: 0, name: 'rule' } });
    expect(event!.message).toMatch(
      /expression "req\.headers\['x-token'\]\[0\] == 'secret'" failed: No such key: x-token; it counts as true, so the rule runs its actions \(on_expression_error: match\)/,
    );
  });

  it('skips a rule whose expression fails when the rule says on_expression_error: skip', () => {
    const { runner, events, owner } = bindPolicy(
      {
        on_http_request: [
          {
            name: 'rule',
            on_expression_error: 'skip',
            expressions: ["req.headers['x-token'][0] == 'secret'"],
            actions: [{ type: 'deny' }],
          },
        ],
      },
      'http',
    );
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'continue',
    );
    expect(events.eventsFor(owner)[0]!.message).toMatch(
      /the rule is skipped \(on_expression_error: skip\)/,
    );
  });

  it('skips, by default, a rule that only changes the request when its expression fails', () => {
    const { runner } = bindPolicy(
      oneRule(
        'on_http_request',
        [{ type: 'add-headers', config: { headers: { 'x-seen': 'yes' } } }],
        ["req.headers['x-token'][0] == 'secret'"],
      ),
      'http',
    );
    const decision = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    expect(decision).toMatchObject({ kind: 'continue', headers: { add: [] } });
  });

  it('carries set-vars from on_tcp_connect to the request and the response phase', () => {
    const { runner } = bindPolicy(
      {
        on_tcp_connect: [
          {
            actions: [
              {
                type: 'set-vars',
                config: { vars: [{ tier: 'gold' }, { port: '${conn.client_port}' }] },
              },
            ],
          },
        ],
        on_http_request: [
          {
            expressions: ["vars.tier == 'gold'"],
            actions: [{ type: 'set-vars', config: { vars: { seen: '${vars.port}' } } }],
          },
        ],
        on_http_response: [
          {
            expressions: ["vars.seen == '51234'"],
            actions: [{ type: 'add-headers', config: { headers: { 'x-tier': '${vars.tier}' } } }],
          },
        ],
      },
      'http',
    );
    const input = { tier: 'bronze' };
    const c = sync(runner.onTcpConnect({ conn: CONN_TLS13, vars: input }));
    expect(c.vars).toEqual({ tier: 'gold', port: '51234' });
    expect(input).toEqual({ tier: 'bronze' });
    const d = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST, vars: c.vars }));
    expect(d.vars).toEqual({ tier: 'gold', port: '51234', seen: '51234' });
    const r = sync(
      runner.onHttpResponse({
        conn: CONN_TLS13,
        req: SAMPLE_REQUEST,
        res: SAMPLE_RESPONSE,
        vars: d.vars,
      }),
    );
    expect(r).toMatchObject({
      kind: 'continue',
      headers: { remove: [], add: [['x-tier', 'gold']] },
    });
  });

  it('lets later rules see header edits and rewrites of earlier ones', () => {
    const { runner } = bindPolicy(
      {
        on_http_request: [
          {
            actions: [
              { type: 'add-headers', config: { headers: { 'x-stage': 'one' } } },
              { type: 'url-rewrite', config: { from: '/api/v1/', to: '/api/v9/' } },
            ],
          },
          {
            expressions: [
              "getReqHeader('x-stage') == ['one']",
              "req.url.path.startsWith('/api/v9/')",
            ],
            actions: [{ type: 'custom-response', config: { body: '${req.url.path}' } }],
          },
        ],
      },
      'http',
    );
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }))).toMatchObject({
      kind: 'respond',
      body: '/api/v9/users/42',
    });
  });

  it('answers synchronously unless an action must wait, then resumes after it', async () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [
        { type: 'restrict-ips', config: { ip_policies: ['ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52'] } },
        log('after the lookup'),
      ]),
      'http',
      { ipPolicyRules: async () => [{ cidr: '203.0.113.0/24', action: 'allow' }] },
    );
    const pending = runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST });
    expect(pending).toBeInstanceOf(Promise);
    expect((await pending).kind).toBe('continue');
    expect(events.eventsFor(owner).map((e) => e.message)).toEqual(['after the lookup']);
  });

  it('requires an IP policy source when the policy names IP policies', () => {
    const policy = compilePolicy(
      JSON.stringify(
        oneRule('on_tcp_connect', [
          { type: 'restrict-ips', config: { ip_policies: ['ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52'] } },
        ]),
      ),
      { protocol: 'tcp' },
    );
    expect(policy.ipPolicyIds).toEqual(['ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52']);
    expect(() => policy.bind({ ownerId: 'edgtcp_1' })).toThrow(
      /uses ip_policies: pass ipPolicyRules/,
    );
  });

  it('returns no changes for a request the policy leaves alone', () => {
    const { runner } = bindPolicy(oneRule('on_http_request', [log('x')]), 'http');
    const decision = sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    expect(decision).toMatchObject({ kind: 'continue', headers: NO_HEADER_CHANGES, vars: {} });
    expect(decision).toHaveProperty('rewrite', undefined);
    expect(Object.keys(decision.vars)).toEqual([]);
  });
});

describe('compilePolicy cache', () => {
  it('compiles a text once per protocol, and keeps runners apart', () => {
    const text = JSON.stringify(oneRule('on_tcp_connect', [{ type: 'deny' }]));
    const a = compilePolicy(text, { protocol: 'tcp' });
    expect(compilePolicy(text, { protocol: 'tcp' })).toBe(a);
    expect(compilePolicy(text, { protocol: 'tls' })).not.toBe(a);
    expect(a.bind({ ownerId: 'x' })).not.toBe(a.bind({ ownerId: 'x' }));
  });

  it('does not cache a refused policy', () => {
    const bad = JSON.stringify(oneRule('on_tcp_connect', [{ type: 'nope' }]));
    expect(() => compilePolicy(bad, { protocol: 'tcp' })).toThrow(/unknown action type/);
    expect(() => compilePolicy(bad, { protocol: 'tcp' })).toThrow(/unknown action type/);
  });
});
