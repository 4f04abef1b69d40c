import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type KeyLike } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  allowLoopbackEgress,
  bindPolicy,
  refuseInternalEgress,
} from '../../../test/support/policy-fixtures.js';
import { JWKS_CACHE } from './jwt-keys.js';

/**
 * jwt-validation against a JWKS served by a real local HTTP server, with keys made by jose:
 * good tokens pass and expose their claims; expired, wrong-audience, wrong-issuer, `alg: none`,
 * wrongly signed and HS256 tokens are refused with 401; a rotated key is fetched again.
 */

let server: Server;
let base: string;
let fetches = 0;
let published: JWK[] = [];
let key1: { privateKey: KeyLike; publicKey: KeyLike };
let key2: { privateKey: KeyLike; publicKey: KeyLike };
let stranger: { privateKey: KeyLike; publicKey: KeyLike };

beforeAll(async () => {
  // The JWKS server is on loopback.
  allowLoopbackEgress();
  // The 30 s between fetches would make the rotation test wait; the logic is the same.
  JWKS_CACHE.cooldownMs = 0;
  key1 = await generateKeyPair('RS256');
  key2 = await generateKeyPair('ES256');
  stranger = await generateKeyPair('RS256');
  published = [{ ...(await exportJWK(key1.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }];
  server = createServer((req, res) => {
    if (req.url === '/not-json') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('an internal admin page');
      return;
    }
    if (req.url === '/jwks.json' || req.url === '/internal/jwks.json') {
      fetches++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: published }));
      return;
    }
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => {
  refuseInternalEgress();
  server.close();
});

const ISSUER = 'https://id.burrow.test/';

function policy(extra: Record<string, unknown> = {}) {
  return {
    on_http_request: [
      {
        actions: [
          {
            type: 'jwt-validation',
            config: {
              issuer: { allow_list: [{ value: ISSUER }] },
              audience: { allow_list: [{ value: 'orders-api' }] },
              http: {
                tokens: [
                  { type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' },
                  { type: 'jwt', method: 'cookie', name: 'session' },
                ],
              },
              jws: {
                allowed_algorithms: ['RS256', 'ES256'],
                keys: { sources: { additional_jkus: [`${base}/jwks.json`] } },
              },
              ...extra,
            },
          },
        ],
      },
      {
        expressions: ["actions.ngrok.jwt_validation.claims.sub == 'banned'"],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      },
      {
        actions: [
          {
            type: 'add-headers',
            config: { headers: { 'x-user': '${actions.ngrok.jwt_validation.claims.sub}' } },
          },
        ],
      },
    ],
  };
}

async function token(
  claims: Record<string, unknown>,
  opts: { key?: KeyLike; alg?: string; kid?: string; exp?: string | number; typ?: string } = {},
): Promise<string> {
  const jwt = new SignJWT({ sub: 'alice', ...claims })
    .setProtectedHeader({
      alg: opts.alg ?? 'RS256',
      kid: opts.kid ?? 'k1',
      ...(opts.typ !== undefined && { typ: opts.typ }),
    })
    .setIssuer((claims.iss as string) ?? ISSUER)
    .setAudience((claims.aud as string) ?? 'orders-api')
    .setIssuedAt()
    .setExpirationTime(opts.exp ?? '5m');
  return jwt.sign(opts.key ?? key1.privateKey);
}

async function call(
  r: ReturnType<typeof bindPolicy>,
  headers: Record<string, string>,
): Promise<{ status: number; user?: string; auth?: string }> {
  const d = await r.runner.onHttpRequest({
    conn: { client_ip: '192.0.2.1' },
    req: { method: 'GET', url: '/orders', headers: { host: 'api.burrow.test', ...headers } },
  });
  if (d.kind === 'respond') return { status: d.status, auth: d.headers['www-authenticate'] };
  if (d.kind === 'close') return { status: 0 };
  return { status: 200, user: d.headers.add.find(([n]) => n === 'x-user')?.[1] };
}

describe('jwt-validation', () => {
  it('lets a valid token through, from a header or a cookie, with its claims for later rules', async () => {
    const r = bindPolicy(policy(), 'https');
    const t = await token({});
    expect(await call(r, { authorization: `Bearer ${t}` })).toMatchObject({
      status: 200,
      user: 'alice',
    });
    expect(await call(r, { cookie: `theme=dark; session=${t}` })).toMatchObject({ status: 200 });
    const banned = await token({ sub: 'banned' });
    expect((await call(r, { authorization: `Bearer ${banned}` })).status).toBe(403);
  });

  it("reads ngrok's token types and a token posted in a form or JSON body (ngrok's example)", async () => {
    const r = bindPolicy(
      policy({
        http: {
          tokens: [
            { type: 'at+jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' },
            { type: 'it+jwt', method: 'body', name: '_id_token' },
          ],
        },
      }),
      'https',
    );
    const access = await token({}, { typ: 'at+jwt' });
    expect(await call(r, { authorization: `Bearer ${access}` })).toMatchObject({ status: 200 });
    const plain = await token({});
    expect(await call(r, { authorization: `Bearer ${plain}` })).toMatchObject({
      status: 401,
      auth: expect.stringMatching(/not an access token/) as unknown,
    });
    const post = async (contentType: string, body: string) => {
      const d = await r.runner.onHttpRequest({
        conn: { client_ip: '192.0.2.1' },
        req: {
          method: 'POST',
          url: '/login',
          headers: { host: 'api.burrow.test', 'content-type': contentType },
          body: () => Promise.resolve(Buffer.from(body)),
        },
      });
      return d.kind === 'respond' ? d.status : 200;
    };
    expect(await post('application/x-www-form-urlencoded', `a=1&_id_token=${plain}`)).toBe(200);
    expect(await post('application/json', JSON.stringify({ _id_token: plain }))).toBe(200);
    expect(await post('application/json', JSON.stringify({ other: plain }))).toBe(401);
  });

  it('refuses missing, expired, wrong-audience, wrong-issuer, unsigned and wrongly signed tokens with 401', async () => {
    const r = bindPolicy(policy(), 'https');
    const cases: Array<[string, Promise<string> | string, RegExp]> = [
      ['missing', '', /no token/],
      ['expired', token({}, { exp: Math.floor(Date.now() / 1000) - 3600 }), /expired/],
      ['audience', token({ aud: 'billing-api' }), /aud/],
      ['issuer', token({ iss: 'https://evil.test/' }), /issuer/],
      ['stranger key', token({}, { key: stranger.privateKey }), /signature|no signing key/],
      ['garbage', 'abc.def.ghi', /malformed/],
    ];
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'alice', iss: ISSUER, aud: 'orders-api', exp: Math.floor(Date.now() / 1000) + 300 })).toString('base64url')}.`;
    cases.push(['alg none', none, /algorithm "none" is not allowed/]);
    const hs = await new SignJWT({ sub: 'alice' })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(ISSUER)
      .setAudience('orders-api')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('a-shared-secret-of-32-bytes-long!!'));
    cases.push(['HS256', hs, /algorithm "HS256" is not allowed/]);
    for (const [what, t, why] of cases) {
      const value = await t;
      const out = await call(r, value === '' ? {} : { authorization: `Bearer ${value}` });
      expect(out.status, what).toBe(401);
      expect(out.auth, what).toMatch(/^Bearer error="invalid_token"/);
      expect(r.events.eventsFor(r.owner)[0]!.message, what).toMatch(why);
    }
  });

  it('accepts a token a little past its expiry within the clock skew', async () => {
    const r = bindPolicy(policy({ lifetime: { clock_skew: '60s' } }), 'https');
    const t = await token({}, { exp: Math.floor(Date.now() / 1000) - 20 });
    expect((await call(r, { authorization: `Bearer ${t}` })).status).toBe(200);
    const strict = bindPolicy(policy({ lifetime: { clock_skew: '5s' } }), 'https');
    expect((await call(strict, { authorization: `Bearer ${t}` })).status).toBe(401);
  });

  it('fetches the JWKS again when a token names a new key (rotation), and caches otherwise', async () => {
    const r = bindPolicy(policy(), 'https');
    const before = fetches;
    await call(r, { authorization: `Bearer ${await token({})}` });
    await call(r, { authorization: `Bearer ${await token({})}` });
    expect(fetches).toBe(before);
    published = [...published, { ...(await exportJWK(key2.publicKey)), kid: 'k2', alg: 'ES256' }];
    const rotated = await token({}, { key: key2.privateKey, alg: 'ES256', kid: 'k2' });
    expect((await call(r, { authorization: `Bearer ${rotated}` })).status).toBe(200);
    expect(fetches).toBe(before + 1);
  });

  it('serves a remembered token with its claims, and refuses it once it expires', async () => {
    let now = Date.now();
    const r = bindPolicy(policy({ lifetime: { clock_skew: '10s' } }), 'https', { now: () => now });
    const t = await token({ sub: 'carol' }, { exp: Math.floor(now / 1000) + 120 });
    for (let i = 0; i < 2; i++) {
      expect(await call(r, { authorization: `Bearer ${t}` })).toMatchObject({
        status: 200,
        user: 'carol',
      });
    }
    now += 200_000; // past exp and the skew: remembered or not, the token must not pass
    expect((await call(r, { authorization: `Bearer ${t}` })).status).toBe(401);
  });

  it('refuses a JWKS on loopback without --egress-allow, never fetching it, and tells the client nothing of it', async () => {
    refuseInternalEgress();
    try {
      const jkus = { keys: { sources: { additional_jkus: [`${base}/internal/jwks.json`] } } };
      const r = bindPolicy(policy({ jws: { allowed_algorithms: ['RS256'], ...jkus } }), 'https');
      const before = fetches;
      const out = await call(r, { authorization: `Bearer ${await token({})}` });
      expect(out.status).toBe(401);
      expect(out.auth).toBe(
        `Bearer error="invalid_token", error_description="the issuer's signing keys could not be fetched (ERR_BURROW_EGRESS_FAILED)"`,
      );
      expect(fetches).toBe(before);
      // The operator's event says what was refused.
      expect(r.events.eventsFor(r.owner)[0]!.message).toMatch(/127\.0\.0\.1.*loopback/);
    } finally {
      allowLoopbackEgress();
    }
  });

  it('tells the client the same when an allowed key URL answers something that is no key set', async () => {
    const jkus = { keys: { sources: { additional_jkus: [`${base}/not-json`] } } };
    const r = bindPolicy(policy({ jws: { allowed_algorithms: ['RS256'], ...jkus } }), 'https');
    const out = await call(r, { authorization: `Bearer ${await token({})}` });
    expect(out.auth).toContain('could not be fetched (ERR_BURROW_EGRESS_FAILED)');
    expect(out.auth).not.toMatch(/JSON|malformed/);
    expect(r.events.eventsFor(r.owner)[0]!.message).toMatch(/JSON/);
  });

  it('refuses bad configs at save time', () => {
    const bad = (extra: Record<string, unknown>) => () => bindPolicy(policy(extra), 'https');
    expect(bad({ jws: { allowed_algorithms: ['none'] } })).toThrow(
      /allowed_algorithms may only hold/,
    );
    expect(bad({ jws: { allowed_algorithms: [] } })).toThrow(/at least one/);
    expect(bad({ issuer: { allow_list: [] } })).toThrow(/issuer.allow_list/);
    expect(bad({ http: { tokens: [] } })).toThrow(/http.tokens/);
    expect(bad({ lifetime: { clock_skew: 'soon' } })).toThrow(/clock_skew/);
    expect(bad({ http: { tokens: [{ type: 'saml', name: 'x' }] } })).toThrow(
      /type must be one of jwt, access_token, at\+jwt, id_token, it\+jwt/,
    );
    expect(bad({ http: { tokens: [{ method: 'query', name: 'x' }] } })).toThrow(
      /must be header, cookie or body/,
    );
  });
});
