import { describe, expect, it } from 'vitest';
import {
  bindPolicy,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
  sync,
} from '../../../test/support/policy-fixtures.js';
import type { IpPolicyRule } from '../events.js';
import type { RequestInput } from '../variables.js';
import { parseDuration } from './config.js';

const IPP = 'ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52';

describe('restrict-ips', () => {
  const connect = (config: Record<string, unknown>, clientIp: string) =>
    sync(
      bindPolicy(
        oneRule('on_tcp_connect', [{ type: 'restrict-ips', config }]),
        'tcp',
      ).runner.onTcpConnect({
        conn: { client_ip: clientIp },
      }),
    ).kind;

  it('allows only clients in an allow block, minus those in a deny block', () => {
    const config = { allow: ['10.0.0.0/8', '2001:db8::/32'], deny: ['10.9.0.0/16'] };
    expect(connect(config, '10.1.2.3')).toBe('continue');
    expect(connect(config, '2001:db8::7')).toBe('continue');
    expect(connect(config, '10.9.0.1')).toBe('close');
    expect(connect(config, '192.0.2.1')).toBe('close');
    expect(connect(config, '::ffff:10.1.2.3')).toBe('continue');
  });

  it('with only deny blocks, lets everyone else through', () => {
    expect(connect({ deny: ['192.0.2.0/24'] }, '192.0.2.9')).toBe('close');
    expect(connect({ deny: ['192.0.2.0/24'] }, '198.51.100.1')).toBe('continue');
  });

  it('answers 403 on HTTP, in the request and the response phase', () => {
    const config = { allow: ['10.0.0.0/8'] };
    const req = bindPolicy(oneRule('on_http_request', [{ type: 'restrict-ips', config }]), 'http');
    expect(sync(req.runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }))).toMatchObject(
      {
        kind: 'respond',
        status: 403,
        body: '',
        // The ingress writes the error page of this code (error-pages.ts refusalPage).
        refusal: { code: 'ERR_BURROW_IP_RESTRICTED', title: 'Forbidden' },
      },
    );
    expect(req.events.eventsFor(req.owner)[0]).toMatchObject({
      outcome: 'restricted',
      message: '203.0.113.7 is not allowed',
    });
    const res = bindPolicy(oneRule('on_http_response', [{ type: 'restrict-ips', config }]), 'http');
    expect(
      sync(
        res.runner.onHttpResponse({ conn: CONN_TLS13, req: SAMPLE_REQUEST, res: SAMPLE_RESPONSE }),
      ),
    ).toMatchObject({ kind: 'respond', status: 403 });
  });

  it('only records refusals when enforce is false', () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_tcp_connect', [
        { type: 'restrict-ips', config: { allow: ['10.0.0.0/8'], enforce: false } },
      ]),
      'tcp',
    );
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('continue');
    expect(events.eventsFor(owner)[0]!.outcome).toBe('would-restrict');
  });

  it('resolves ip_policies at run time, joining their allow and deny rules', async () => {
    let rules: IpPolicyRule[] = [{ cidr: '203.0.113.0/24', action: 'allow' }];
    const asked: string[][] = [];
    const { runner } = bindPolicy(
      oneRule('on_tcp_connect', [
        { type: 'restrict-ips', config: { ip_policies: [IPP], deny: ['203.0.113.66/32'] } },
      ]),
      'tcp',
      {
        ipPolicyRules: async (ids) => {
          asked.push([...ids]);
          return rules;
        },
      },
    );
    expect((await runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('continue');
    expect((await runner.onTcpConnect({ conn: { client_ip: '203.0.113.66' } })).kind).toBe('close');
    expect((await runner.onTcpConnect({ conn: { client_ip: '198.51.100.1' } })).kind).toBe('close');
    expect(asked[0]).toEqual([IPP]);
    // An edit to the IP policy applies to the next connection.
    rules = [{ cidr: '203.0.113.7/32', action: 'deny' }];
    expect((await runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('close');
  });

  it('refuses when the IP policies cannot be read', async () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_tcp_connect', [{ type: 'restrict-ips', config: { ip_policies: [IPP] } }]),
      'tcp',
      { ipPolicyRules: () => Promise.reject(new Error('database down')) },
    );
    expect((await runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('close');
    expect(events.eventsFor(owner)[0]!.message).toMatch(
      /cannot read IP policies ipp_.*: database down; refusing 203\.0\.113\.7/,
    );
  });
});

describe('basic-auth', () => {
  const policy = oneRule('on_http_request', [
    {
      type: 'basic-auth',
      config: { realm: 'staging', credentials: ['alice:correct-horse', 'bob:battery-staple'] },
    },
  ]);
  const withAuth = (authorization?: string): RequestInput => ({
    ...SAMPLE_REQUEST,
    headers: { ...SAMPLE_REQUEST.headers, authorization },
  });
  const basic = (pair: string) => `Basic ${Buffer.from(pair).toString('base64')}`;

  it('asks for credentials with 401 and WWW-Authenticate', () => {
    const { runner, events, owner } = bindPolicy(policy, 'http');
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: withAuth() }))).toMatchObject({
      kind: 'respond',
      status: 401,
      headers: { 'www-authenticate': 'Basic realm="staging", charset="UTF-8"' },
      body: '',
    });
    expect(events.eventsFor(owner)[0]).toMatchObject({
      outcome: 'unauthorized',
      message: 'no credentials given',
    });
  });

  it('lets each listed user through and refuses anything else', () => {
    const { runner } = bindPolicy(policy, 'http');
    const kind = (auth: string) =>
      sync(runner.onHttpRequest({ conn: CONN_TLS13, req: withAuth(auth) })).kind;
    expect(kind(basic('alice:correct-horse'))).toBe('continue');
    expect(kind(basic('bob:battery-staple'))).toBe('continue');
    expect(kind(`basic ${Buffer.from('bob:battery-staple').toString('base64')}`)).toBe('continue');
    expect(kind(basic('alice:battery-staple'))).toBe('respond');
    expect(kind(basic('alice:correct-horse '))).toBe('respond');
    expect(kind('Bearer abc')).toBe('respond');
  });

  it('with enforce: false lets everyone through and tells later rules what was presented', () => {
    const { runner, events, owner } = bindPolicy(
      {
        on_http_request: [
          {
            actions: [
              {
                type: 'basic-auth',
                config: { credentials: ['alice:correct-horse'], enforce: false },
              },
            ],
          },
          {
            expressions: ['!actions.ngrok.basic_auth.credentials.authorized'],
            actions: [
              {
                type: 'custom-response',
                config: {
                  status_code: 200,
                  body: 'guest ${actions.ngrok.basic_auth.credentials.presented} ${actions.ngrok.basic_auth.credentials.username}',
                },
              },
            ],
          },
        ],
      },
      'http',
    );
    const send = (auth?: string) =>
      sync(runner.onHttpRequest({ conn: CONN_TLS13, req: withAuth(auth) }));
    expect(send()).toMatchObject({ kind: 'respond', body: 'guest false ' });
    expect(send(basic('mallory:guessing-it'))).toMatchObject({ body: 'guest true mallory' });
    expect(send(basic('alice:correct-horse')).kind).toBe('continue');
    expect(events.eventsFor(owner).map((e) => e.outcome)).toContain('would-unauthorize');
  });
});

describe('rate-limit', () => {
  const policy = (config: Record<string, unknown>) =>
    oneRule('on_http_request', [
      { type: 'rate-limit', config: { capacity: 2, rate: '60s', ...config } },
    ]);

  it('answers 429 with Retry-After once the bucket is full', () => {
    let now = 1_000_000 * 60_000; // the start of a window
    const { runner, events, owner } = bindPolicy(
      policy({ bucket_key: ['conn.client_ip'] }),
      'http',
      { now: () => now },
    );
    const send = () => sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    expect(send().kind).toBe('continue');
    now += 1000;
    expect(send().kind).toBe('continue');
    const refused = send();
    expect(refused).toMatchObject({ kind: 'respond', status: 429, body: '' });
    const retryAfter = Number(
      (refused as { headers: Record<string, string> }).headers['retry-after'],
    );
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(120);
    expect(events.eventsFor(owner)[0]).toMatchObject({
      outcome: 'rate-limited',
      metadata: { bucket: '203.0.113.7', capacity: 2, retry_after: retryAfter },
    });
    // Once Retry-After has passed, the client gets through again.
    now += retryAfter * 1000;
    expect(send().kind).toBe('continue');
  });

  it('counts each bucket separately', () => {
    const { runner } = bindPolicy(
      policy({ capacity: 1, bucket_key: ['conn.client_ip', "getReqHeader('x-user')"] }),
      'http',
    );
    const send = (ip: string, user: string) =>
      sync(
        runner.onHttpRequest({
          conn: { client_ip: ip },
          req: { ...SAMPLE_REQUEST, headers: { ...SAMPLE_REQUEST.headers, 'x-user': user } },
        }),
      ).kind;
    expect(send('10.0.0.1', 'a')).toBe('continue');
    expect(send('10.0.0.1', 'b')).toBe('continue');
    expect(send('10.0.0.2', 'a')).toBe('continue');
    expect(send('10.0.0.1', 'a')).toBe('respond');
  });

  it('keeps counters per runner, so endpoints sharing a policy do not share limits', () => {
    const first = bindPolicy(policy({ capacity: 1 }), 'http').runner;
    const second = first.policy.bind({ ownerId: 'other' });
    expect(sync(first.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'continue',
    );
    expect(sync(first.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'respond',
    );
    expect(sync(second.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'continue',
    );
  });

  it('only records when enforce is false', () => {
    const { runner, events, owner } = bindPolicy(policy({ capacity: 1, enforce: false }), 'http');
    sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }));
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST })).kind).toBe(
      'continue',
    );
    expect(events.eventsFor(owner)[0]!.outcome).toBe('would-rate-limit');
  });

  it('reads Go durations', () => {
    expect(parseDuration('60s')).toBe(60_000);
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('60')).toBeUndefined();
    expect(parseDuration('s')).toBeUndefined();
  });
});
