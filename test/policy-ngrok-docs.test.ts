import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { jwtValidation, testJwtIssuer, type TestJwtIssuer } from './support/jwt.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { double, writeMmdb } from './support/mmdb-writer.js';

/**
 * Issue 31: policies as ngrok's documentation prints them, on live traffic through a real
 * `burrow server` and the unmodified @ngrok/ngrok agent. The edge sees socket addresses, so the
 * IP intelligence database built here maps loopback addresses curl binds to (127.0.0.2, …) to
 * made-up places; the unit tests (src/policy/ip-intel.test.ts) do the same with the test ranges.
 */

const EDGE_UA =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91';

/** One rule per path, so one endpoint serves every case. */
const at = (path: string, rule: Record<string, unknown>) => ({
  ...rule,
  expressions: [`req.url.path == '${path}'`, ...((rule.expressions as string[]) ?? [])],
});

function docsPolicy(checker: string): string {
  return JSON.stringify({
    on_http_request: [
      // IP intelligence (ngrok: "Block traffic from specific countries", "IP categories").
      at('/geo', {
        expressions: ["conn.client_ip.geo.location.country_code in ['FR']"],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      }),
      at('/geo', {
        expressions: ["'proxy.anonymous.tor' in conn.client_ip.categories"],
        actions: [{ type: 'deny', config: { status_code: 451 } }],
      }),
      at('/geo', {
        actions: [
          {
            type: 'custom-response',
            config: {
              body: '${conn.client_ip.geo.location.country_code} ${conn.client_ip.geo.location.city} ${conn.geo.country}',
            },
          },
        ],
      }),
      at('/asn', {
        expressions: ['conn.client_ip.is_on_blocklist'],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      }),
      at('/asn', {
        actions: [
          {
            type: 'custom-response',
            config: { body: '${conn.client_ip.as.number} ${conn.client_ip.as.organization}' },
          },
        ],
      }),
      // restrict-ips and its results.
      at('/ips', {
        actions: [
          { type: 'restrict-ips', config: { allow: ['127.0.0.0/30'] } },
          {
            type: 'custom-response',
            config: {
              body: '${actions.ngrok.restrict_ips.action} ${actions.ngrok.restrict_ips.matched_cidr}',
            },
          },
        ],
      }),
      // circuit-breaker with error_threshold 0: one 5xx opens it.
      at('/cb', {
        actions: [{ type: 'circuit-breaker', config: { error_threshold: 0, volume_threshold: 1 } }],
      }),
      // Macros.
      at('/macros', {
        expressions: ["json.decode('{\"a\": [1, 2]}')['a'][1] == 2"],
        actions: [
          {
            type: 'custom-response',
            config: {
              body: "${b64.encode('hi')} ${basic_auth.encode('username', 'password1')}",
            },
          },
        ],
      }),
      // jwt-validation as ngrok's example prints it: an access token in a header, or an ID token
      // posted in the body.
      at('/jwt', {
        actions: [
          jwtValidation(`${checker}/jwks.json`, [
            { type: 'at+jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' },
            { type: 'it+jwt', method: 'body', name: '_id_token' },
          ]),
        ],
      }),
      // oauth without client_id: the operator's app (--oauth-google-client-id).
      at('/login', {
        actions: [{ type: 'oauth', config: { provider: 'google', scopes: ['openid'] } }],
      }),
      // User agent filtering example, as printed.
      at('/ua', {
        expressions: ["req.user_agent.name == 'Edge'"],
        actions: [
          { type: 'custom-response', config: { status_code: 200, body: 'Hello Edge User!' } },
        ],
      }),
      at('/ua', {
        expressions: ['req.user_agent.is_bot'],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      }),
      // Cookies, rand (A/B), timestamps, header names in any case.
      at('/vars', {
        expressions: ['rand.double() >= 0.0', 'timestamp(time.now) >= conn.ts.start'],
        actions: [
          {
            type: 'custom-response',
            config: {
              body: "${req.cookies['ab'][0].value} ${req.headers['X-Api-Version'][0]} ${rand.int(7, 7)}",
            },
          },
        ],
      }),
      // A deny rule whose expression fails (no such header): fails closed; the same with skip.
      at('/guarded', {
        expressions: ["req.headers['x-tenant'][0] == 'blocked'"],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      }),
      at('/lenient', {
        on_expression_error: 'skip',
        expressions: ["req.headers['x-tenant'][0] == 'blocked'"],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      }),
      // basic-auth with enforce: false, guests served differently.
      at('/guest', {
        actions: [
          { type: 'basic-auth', config: { credentials: ['alice:correct-horse'], enforce: false } },
          {
            type: 'custom-response',
            config: { body: 'authorized=${actions.ngrok.basic_auth.credentials.authorized}' },
          },
        ],
      }),
      // http-request to a checking service, then a decision on its answer.
      at('/checked', {
        actions: [
          {
            type: 'http-request',
            config: {
              url: `${checker}/check`,
              query_params: [{ key: 'ip', value: '${conn.client_ip}' }],
            },
          },
        ],
      }),
      at('/checked', {
        expressions: ['!json.decode(actions.ngrok.http_request.res.body).allowed'],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      }),
      // url-rewrite with ${req.url.authority} in from (ngrok's example).
      {
        actions: [
          {
            type: 'url-rewrite',
            config: { from: '${req.url.scheme}://${req.url.authority}/old/(.*)', to: '/new/$1' },
          },
        ],
      },
    ],
  });
}

describe('ngrok documentation examples on live traffic (@ngrok/ngrok)', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  let checker: LocalServer;
  let url: string;
  let issuer: TestJwtIssuer;
  const token = (typ?: string) => issuer.sign(typ);

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-geoip-e2e-'));
    const cityFile = join(dir, 'city.mmdb');
    const categoriesFile = join(dir, 'categories.mmdb');
    const asnFile = join(dir, 'asn.mmdb');
    writeFileSync(
      asnFile,
      writeMmdb('GeoLite2-ASN', [
        {
          cidr: '127.0.0.3/32',
          record: { autonomous_system_number: 64501, autonomous_system_organization: 'Test AS' },
        },
      ]),
    );
    const place = (code: string, name: string, town: string) => ({
      city: { names: { en: town } },
      country: { iso_code: code, names: { en: name } },
      location: { latitude: double(48.8), longitude: double(2.3), accuracy_radius: 10 },
    });
    writeFileSync(
      cityFile,
      writeMmdb('GeoLite2-City', [
        { cidr: '127.0.0.2/32', record: place('FR', 'France', 'Paris') },
        { cidr: '127.0.0.3/32', record: place('CA', 'Canada', 'Montreal') },
        { cidr: '127.0.0.4/32', record: place('DE', 'Germany', 'Berlin') },
      ]),
    );
    writeFileSync(
      categoriesFile,
      writeMmdb('Burrow-Categories', [
        { cidr: '127.0.0.4/32', record: { categories: ['proxy.anonymous.tor'] } },
        { cidr: '127.0.0.6/32', record: { categories: ['blocklist.example.drop'] } },
      ]),
    );
    edge = await startEdgeServer('sqlite', [
      ...['--geoip-city', cityFile, '--geoip-categories', categoriesFile, '--geoip-asn', asnFile],
      ...['--oauth-google-client-id', 'operator-app', '--oauth-google-client-secret', 'op-secret'],
      // The checking service listens on loopback: allowed as an operator would.
      ...['--egress-allow', '127.0.0.1'],
    ]);
    web = await startHttpUpstream((req, res) => {
      if (req.url === '/cb') res.statusCode = 500;
      res.end(`upstream ${req.url}`);
    });
    issuer = await testJwtIssuer();
    checker = await startHttpUpstream((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/jwks.json') {
        res.end(issuer.jwks);
        return;
      }
      res.end(JSON.stringify({ allowed: !(req.url ?? '').includes('ip=127.0.0.3') }));
    });
    const listener = await ngrok.forward({
      addr: `127.0.0.1:${web.port}`,
      authtoken: await createAuthtoken(edge.api),
      server_addr: `127.0.0.1:${edge.ports.agent}`,
      session_ca_cert: edge.caPem,
      traffic_policy: docsPolicy(`http://127.0.0.1:${checker.port}`),
      force_new_session: true,
    });
    url = listener.url()!;
  }, 90_000);

  afterAll(async () => {
    await ngrok.disconnect().catch(() => undefined);
    await web?.close();
    await checker?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );
  const from = (ip: string, path: string, extra: string[] = []) =>
    curlUrl(url, path, ['--interface', ip, ...extra]);

  it('IP intelligence: a country denied, a category denied, the place of others', async () => {
    expect((await from('127.0.0.2', '/geo')).status).toBe(403);
    expect((await from('127.0.0.4', '/geo')).status).toBe(451);
    const ca = await from('127.0.0.3', '/geo');
    expect([ca.status, ca.text]).toEqual([200, 'CA Montreal Canada']);
    const unknown = await from('127.0.0.5', '/geo');
    expect([unknown.status, unknown.text]).toEqual([200, '  ']);
  });

  it('IP intelligence: the AS of a client, a client on a blocklist denied', async () => {
    const known = await from('127.0.0.3', '/asn');
    expect([known.status, known.text]).toEqual([200, '64501 Test AS']);
    expect((await from('127.0.0.6', '/asn')).status).toBe(403);
  });

  it('restrict-ips tells later rules the block that matched', async () => {
    expect((await from('127.0.0.2', '/ips')).text).toBe('allow 127.0.0.0/30');
    expect((await from('127.0.0.5', '/ips')).status).toBe(403);
  });

  it('circuit-breaker with error_threshold 0 opens on one 5xx', async () => {
    expect((await from('127.0.0.1', '/cb')).status).toBe(500);
    expect((await from('127.0.0.1', '/cb')).status).toBe(503);
  });

  it('macros: b64, basic_auth, json', async () => {
    expect((await from('127.0.0.1', '/macros')).text).toBe('aGk= Basic dXNlcm5hbWU6cGFzc3dvcmQx');
  });

  it('jwt-validation as printed: an at+jwt header, or an ID token posted in a form', async () => {
    const access = await from('127.0.0.1', '/jwt', [
      '-H',
      `Authorization: Bearer ${await token('at+jwt')}`,
    ]);
    expect([access.status, access.text]).toEqual([200, 'upstream /jwt']);
    const plain = await from('127.0.0.1', '/jwt', ['-H', `Authorization: Bearer ${await token()}`]);
    expect(plain.status).toBe(401);
    expect(plain.headers['www-authenticate']).toMatch(/not an access token/);
    const posted = await from('127.0.0.1', '/jwt', ['--data', `_id_token=${await token()}&x=1`]);
    expect([posted.status, posted.text]).toEqual([200, 'upstream /jwt']);
    expect((await from('127.0.0.1', '/jwt', ['--data', 'x=1'])).status).toBe(401);
  });

  it("oauth without client_id logs in with the operator's app (managed apps), openid asked", async () => {
    const reply = await from('127.0.0.1', '/login', ['-H', 'Accept: text/html']);
    expect(reply.status).toBe(302);
    const location = new URL(reply.headers.location!);
    expect(location.origin).toBe('https://accounts.google.com');
    expect(location.searchParams.get('client_id')).toBe('operator-app');
    expect(location.searchParams.get('scope')).toBe('openid email profile');
  });

  it('user agent filtering as printed: Edge users greeted, bots denied', async () => {
    expect((await from('127.0.0.1', '/ua', ['-A', EDGE_UA])).text).toBe('Hello Edge User!');
    const bot = await from('127.0.0.1', '/ua', [
      '-A',
      'Googlebot/2.1 (+http://www.google.com/bot.html)',
    ]);
    expect(bot.status).toBe(403);
  });

  it('cookies, header names in any case, rand and timestamp(time.now)', async () => {
    const reply = await from('127.0.0.1', '/vars', [
      '-H',
      'Cookie: ab=b',
      '-H',
      'x-api-version: 2',
    ]);
    expect([reply.status, reply.text]).toEqual([200, 'b 2 7']);
  });

  it('a deny rule whose expression fails answers 403 (fails closed); with on_expression_error: skip it lets through', async () => {
    expect((await from('127.0.0.1', '/guarded')).status).toBe(403);
    const lenient = await from('127.0.0.1', '/lenient');
    expect([lenient.status, lenient.text]).toEqual([200, 'upstream /lenient']);
  });

  it('basic-auth with enforce: false and the action result', async () => {
    expect((await from('127.0.0.1', '/guest')).text).toBe('authorized=false');
    expect((await from('127.0.0.1', '/guest', ['-u', 'alice:correct-horse'])).text).toBe(
      'authorized=true',
    );
  });

  it('http-request: the checking service decides', async () => {
    expect((await from('127.0.0.2', '/checked')).status).toBe(200);
    expect((await from('127.0.0.3', '/checked')).status).toBe(403);
  });

  it("url-rewrite with ${req.url.authority} in from (ngrok's example)", async () => {
    const reply = await from('127.0.0.1', '/old/page?x=1');
    expect(reply.text).toBe('upstream /new/page?x=1');
  });

  it('POST /traffic_policy/validate agrees with a bind: an unknown ipp_ is refused', async () => {
    const reply = await edge.api.post('/traffic_policy/validate', {
      protocol: 'https',
      value:
        'on_http_request: [{actions: [{type: restrict-ips, config: {ip_policies: [ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52]}}]}]',
    });
    expect(reply.body).toMatchObject({ valid: false, error: { error_code: 'ERR_NGROK_2204' } });
  });
});
