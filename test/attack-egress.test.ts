import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type ngrok from '@ngrok/ngrok';
import { generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { until } from './support/mux.js';

/**
 * Issue 27 item 4, as the attack: an authtoken holder binds, with the unmodified @ngrok/ngrok,
 * policies whose jwt-validation key URL and openid-connect issuer are internal addresses, then
 * asks its own endpoint. The edge (a real `burrow server` without `--egress-allow`) must not
 * send a request there, and what the visitor gets back must not tell what listens there; the
 * operator's log says what was refused.
 */

describe('a policy cannot make the edge fetch internal addresses', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  /** An internal service on loopback: a JWKS and a discovery document that is none. */
  let internal: Server;
  let internalBase: string;
  let internalHits = 0;
  let session: ngrok.Session;
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    web = await startHttpUpstream((_req, res) => res.end('the service'));
    internal = createServer((req, res) => {
      internalHits++;
      if (req.url === '/jwks.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"keys":"an internal admin console"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>internal admin</h1>');
    });
    internal.listen(0, '127.0.0.1');
    await once(internal, 'listening');
    internalBase = `http://127.0.0.1:${(internal.address() as AddressInfo).port}`;
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
  });

  afterAll(async () => {
    await session?.close();
    internal?.close();
    await web?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  const endpoint = async (policy: unknown): Promise<string> => {
    const listener = await session
      .httpEndpoint()
      .trafficPolicy(JSON.stringify(policy))
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    return listener.url()!;
  };

  const refusedInLog = (reason: string) =>
    edge.server.logs.filter(
      (l) => l.code === 'ERR_BURROW_EGRESS_REFUSED' && String(l.msg).includes(`${reason} address`),
    );

  it('jwt-validation with additional_jkus on 127.0.0.1: not fetched, the visitor told only that the keys failed', async () => {
    const issuer = 'https://id.attacker.test/';
    const url = await endpoint({
      on_http_request: [
        {
          actions: [
            {
              type: 'jwt-validation',
              config: {
                issuer: { allow_list: [{ value: issuer }] },
                http: {
                  tokens: [
                    { type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' },
                  ],
                },
                jws: {
                  allowed_algorithms: ['RS256'],
                  keys: { sources: { additional_jkus: [`${internalBase}/jwks.json`] } },
                },
              },
            },
          ],
        },
      ],
    });
    const { privateKey } = await generateKeyPair('RS256');
    const token = await new SignJWT({ sub: 'mallory' })
      .setProtectedHeader({ alg: 'RS256', kid: 'k' })
      .setIssuer(issuer)
      .setExpirationTime('5m')
      .sign(privateKey);
    const res = await curlUrl(url, '/', ['-H', `Authorization: Bearer ${token}`]);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(
      `Bearer error="invalid_token", error_description="the issuer's signing keys could not be fetched (ERR_BURROW_EGRESS_FAILED)"`,
    );
    expect(res.text).not.toMatch(/127\.0\.0\.1|admin|JSON|malformed/);
    expect(internalHits).toBe(0);
    // The server's log line comes over its stdout, which may trail the answer.
    await until(() => refusedInLog('loopback').length > 0);
  });

  it.each([
    ['a loopback address', () => internalBase, 'loopback'],
    ['a private address', () => 'https://10.255.255.1', 'private'],
  ])(
    'openid-connect with issuer_url on %s: not fetched, the visitor gets a page that names no reason',
    async (_what, issuerUrl, reason) => {
      const url = await endpoint({
        on_http_request: [
          {
            actions: [
              {
                type: 'openid-connect',
                config: {
                  issuer_url: issuerUrl(),
                  client_id: 'app',
                  client_secret: 'a-secret-0123456789',
                },
              },
            ],
          },
        ],
      });
      const res = await curlUrl(url, '/');
      expect(res.status).toBe(502);
      expect(res.text).toContain(
        'The identity provider could not be reached or its answer could not be used (ERR_BURROW_LOGIN_PROVIDER).',
      );
      expect(res.text).not.toMatch(
        /10\.255|127\.0\.0\.1|admin|invalid response|JSON|fetch failed/i,
      );
      expect(internalHits).toBe(0);
      await until(() => refusedInLog(reason).length > 0);
    },
  );
});
