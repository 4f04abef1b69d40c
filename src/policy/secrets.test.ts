import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { startTestUpstream, type TestUpstream } from '../../test/support/http-upstream.js';
import {
  fakeTunnel,
  httpRequest,
  startTestIngress,
  type TestIngress,
} from '../../test/support/ingress.js';
import { createLogger } from '../core/logger.js';
import { endpointInputOf } from '../edge/binds/endpoint-policy.js';
import { compilePolicy, PolicyEventLog } from './index.js';
import { SecretsResolver } from './secrets.js';

const TOKEN = 'tok-7f3c9a1e5b2d';

describe('secrets.get in policies, on a real ingress', () => {
  let api: TestApi;
  let t: TestIngress;
  let upstream: TestUpstream;
  let resolver: SecretsResolver;
  let secretId: string;
  let logged = '';
  const events = new PolicyEventLog({
    logger: createLogger(
      'info',
      new Writable({
        write(chunk: Buffer, _enc, done) {
          logged += chunk.toString('utf8');
          done();
        },
      }),
    ),
  });
  let n = 0;

  beforeAll(async () => {
    api = await createTestApi('sqlite');
    t = await startTestIngress();
    upstream = await startTestUpstream();
    const vault = await api.call('POST', '/vaults', { name: 'v' });
    const secret = await api.call('POST', '/secrets', {
      vault_id: vault.body.id,
      name: 'token',
      value: TOKEN,
    });
    secretId = secret.body.id as string;
    resolver = new SecretsResolver(() => api.repos.secrets.entries());
    await resolver.reload();
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
    await api.close();
  });

  /** An online tunnel whose policy reads secrets from `resolver`; its echoed request headers. */
  function policied(policy: string): { host: string; owner: string } {
    const host = `s${++n}.burrow.test`;
    const tunnel = fakeTunnel({ proto: 'http', hostname: host, upstreamPort: upstream.port });
    const runner = compilePolicy(policy, { protocol: 'http' }).bind({
      ownerId: tunnel.id,
      events,
      secrets: resolver,
    });
    tunnel.trafficPolicy = policy;
    tunnel.policy = { ownerId: tunnel.id, runner, endpoint: endpointInputOf(tunnel) };
    t.registry.addTunnel(tunnel);
    return { host, owner: tunnel.id };
  }

  async function echoedHeaders(host: string): Promise<Record<string, string>> {
    const reply = await httpRequest(t.httpPort, { host, path: '/echo' });
    expect(reply.status).toBe(200);
    return (JSON.parse(reply.body) as { headers: Record<string, string> }).headers;
  }

  it("sets a header to the secret's value, and to the new one after a reload", async () => {
    const { host } = policied(`
on_http_request:
  - actions:
      - type: add-headers
        config:
          headers:
            authorization: "Bearer \${secrets.get('v', 'token')}"
`);
    expect((await echoedHeaders(host)).authorization).toBe(`Bearer ${TOKEN}`);
    expect(
      (await api.call('PATCH', `/secrets/${secretId}`, { value: 'rotated-0042' })).status,
    ).toBe(200);
    // The snapshot is what runs: the old value until the edge reloads.
    expect((await echoedHeaders(host)).authorization).toBe(`Bearer ${TOKEN}`);
    await resolver.reload();
    expect((await echoedHeaders(host)).authorization).toBe('Bearer rotated-0042');
    await api.call('PATCH', `/secrets/${secretId}`, { value: TOKEN });
    await resolver.reload();
  });

  it('works in expressions too', async () => {
    const { host } = policied(`
on_http_request:
  - expressions: ["req.headers['x-key'][0] == secrets.get('v', 'token')"]
    actions:
      - type: custom-response
        config: { status_code: 200, content: matched }
`);
    const ok = await httpRequest(t.httpPort, { host, path: '/', headers: { 'x-key': TOKEN } });
    expect(ok.body).toBe('matched');
    const no = await httpRequest(t.httpPort, { host, path: '/echo', headers: { 'x-key': 'no' } });
    expect(no.body).not.toBe('matched');
  });

  it('renders a template with a missing secret as empty, with an error event naming it', async () => {
    const { host, owner } = policied(`
on_http_request:
  - actions:
      - type: add-headers
        config:
          headers:
            x-missing: "[\${secrets.get('v', 'nope')}]"
            x-no-vault: "[\${secrets.get('nowhere', 'token')}]"
`);
    const headers = await echoedHeaders(host);
    // Like any failing expression, the whole template renders as ''.
    expect(headers['x-missing']).toBe('');
    expect(headers['x-no-vault']).toBe('');
    const errors = events.eventsFor(owner).filter((e) => e.outcome === 'error');
    expect(errors.map((e) => e.message)).toEqual(
      expect.arrayContaining([
        expect.stringContaining('no secret "nope" in vault "v"'),
        expect.stringContaining('no secret "token" in vault "nowhere"'),
      ]),
    );
  });

  it('keeps values out of events and logs: computing on a secret is refused, a header set from one reads as [secret]', async () => {
    // The attack of issue 27: a log action leaking a value a character at a time.
    for (const leak of [
      "${size(secrets.get('v', 'token'))}",
      "${secrets.get('v', 'token').matches('^tok')}",
    ]) {
      expect(() =>
        compilePolicy(
          `on_http_request:\n  - actions:\n      - type: log\n        config: { metadata: { leak: "${leak}" } }\n`,
          { protocol: 'http' },
        ),
      ).toThrow(/may only be used whole/);
    }
    const { host, owner } = policied(`
on_http_request:
  - expressions: ["req.headers['x-key'][0] == secrets.get('v', 'token')"]
    actions:
      - type: add-headers
        config:
          headers:
            x-token: "\${secrets.get('v', 'token')}"
      - type: log
        config:
          metadata:
            sent: "\${req.headers['x-token'][0]}"
            size: "\${size(req.headers['x-token'][0])}"
            presented: "\${req.headers['x-key'][0]}"
`);
    const reply = await httpRequest(t.httpPort, {
      host,
      path: '/echo',
      headers: { 'x-key': TOKEN },
    });
    expect((JSON.parse(reply.body) as { headers: Record<string, string> }).headers['x-token']).toBe(
      TOKEN,
    );
    const [event] = events.eventsFor(owner).filter((e) => e.outcome === 'log');
    // The header reads as [secret]; what the client presented is redacted by value.
    expect(event!.metadata).toEqual({ sent: '[secret]', size: '8', presented: '[secret]' });
    expect(JSON.stringify(events.eventsFor(owner))).not.toContain(TOKEN);
    expect(logged).not.toContain(TOKEN);
  });
});

describe('secret redaction in event metadata', () => {
  it('finds a value JSON would escape, and a short value cannot break the event', async () => {
    const api = await createTestApi('sqlite');
    try {
      const vault = await api.call('POST', '/vaults', { name: 'w' });
      const quoted = 'say "hi" \\ bye';
      for (const [name, value] of [
        ['quoted', quoted],
        ['short', 'true'],
      ]) {
        const made = await api.call('POST', '/secrets', { vault_id: vault.body.id, name, value });
        expect(made.status).toBe(201);
      }
      const resolver = new SecretsResolver(() => api.repos.secrets.entries());
      await resolver.reload();
      const events = new PolicyEventLog();
      // The client presents the values; comparing them with the secrets makes the runner redact.
      const runner = compilePolicy(
        JSON.stringify({
          on_http_request: [
            {
              expressions: [
                "req.headers['q'][0] == secrets.get('w', 'quoted') && req.headers['s'][0] == secrets.get('w', 'short')",
              ],
              actions: [
                {
                  type: 'log',
                  config: {
                    metadata: {
                      q: "${req.headers['q'][0]}",
                      s: "${req.headers['s'][0]}",
                      flag: true,
                    },
                  },
                },
              ],
            },
          ],
        }),
        { protocol: 'https' },
      ).bind({ ownerId: 'ep_redact', events, secrets: resolver });
      const decision = await runner.onHttpRequest({
        conn: { client_ip: '192.0.2.1' },
        req: { method: 'GET', url: '/', headers: { host: 'r.burrow.test', q: quoted, s: 'true' } },
      });
      expect(decision.kind).toBe('continue');
      const recorded = JSON.stringify(events.eventsFor('ep_redact'));
      expect(recorded).toContain('[secret]');
      expect(recorded).toContain('"flag":true');
      expect(recorded).not.toContain('hi');
      expect(recorded).not.toContain(JSON.stringify(quoted).slice(1, -1));
    } finally {
      await api.close();
    }
  });
});

describe('SecretsResolver', () => {
  it('keeps the previous snapshot when a load fails, and loads again after a change mid-load', async () => {
    let calls = 0;
    let fail = false;
    const resolver = new SecretsResolver(async () => {
      calls++;
      if (fail) throw new Error('store down');
      return [{ vault: 'v', name: 'a', value: `value-${calls}` }];
    });
    await resolver.reload();
    expect(resolver.get('v', 'a')).toBe('value-1');
    fail = true;
    await expect(resolver.reload()).rejects.toThrow('store down');
    expect(resolver.get('v', 'a')).toBe('value-1');
    fail = false;
    const first = resolver.reload();
    const second = resolver.reload();
    await Promise.all([first, second]);
    expect(calls).toBe(4);
    expect(resolver.get('v', 'a')).toBe('value-4');
    expect(resolver.get('v', 'b')).toBeUndefined();
    expect(resolver.redact('x value-4 y')).toBe('x [secret] y');
  });

  it('makes policies without a resolver fail secrets.get at run time, and compile them fine', () => {
    const policy = compilePolicy(
      JSON.stringify({
        on_http_request: [
          {
            actions: [
              { type: 'add-headers', config: { headers: { a: "${secrets.get('v', 'x')}" } } },
            ],
          },
        ],
      }),
      { protocol: 'http' },
    );
    const events = new PolicyEventLog();
    const out = policy.bind({ ownerId: 'ep_x', events }).onHttpRequest({
      conn: { client_ip: '192.0.2.1' },
      req: { method: 'GET', url: '/', headers: { host: 'a' } },
    });
    expect(out).toMatchObject({ kind: 'continue', headers: { add: [['a', '']] } });
    expect(events.eventsFor('ep_x')[0]!.message).toContain('no secret "x" in vault "v"');
  });

  it('refuses secrets.get with the wrong arguments at save time', () => {
    expect(() =>
      compilePolicy(
        JSON.stringify({
          on_tcp_connect: [
            { expressions: ["secrets.get('v') == 'a'"], actions: [{ type: 'deny' }] },
          ],
        }),
        { protocol: 'tcp' },
      ),
    ).toThrow(/must name its vault and secret with two string literals/);
  });
});
