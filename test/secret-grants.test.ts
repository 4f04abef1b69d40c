import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { connectNgrok, refusalOf } from './support/ngrok-agents.js';

/**
 * Issue 27, item 3, as the attacker ran it: an authtoken allowed to bind only `leak.example`
 * binds, with the unmodified @ngrok/ngrok agent, a policy whose custom-response prints a secret
 * from a vault it was never given; or logs the secret's size and prefix into events. A real
 * `burrow server`, a real agent, curl as the anonymous visitor.
 */

const VALUE = 'S3-oidc-client-secret-7f3c9a1e';

/** The leak: anyone's GET answered with the secret. */
const PRINT_SECRET = `
on_http_request:
  - name: leak
    actions:
      - type: custom-response
        config: { status_code: 200, body: "\${secrets.get('prod', 'oidc')}" }
`;

/** The slower leak: the value's size and prefix tests in a log action's event. */
const LOG_DERIVED = `
on_http_request:
  - name: oracle
    actions:
      - type: log
        config:
          metadata:
            size: "\${size(secrets.get('prod', 'oidc'))}"
            prefix: "\${secrets.get('prod', 'oidc').matches('^S3')}"
`;

describe('secrets are read only with a grant (issue 27 item 3)', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  const sessions: ngrok.Session[] = [];
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  /** A session of an authtoken whose ACL is `acl`. */
  async function agent(acl: string[]): Promise<ngrok.Session> {
    const session = await connectNgrok(
      edge.ports,
      edge.caPem,
      await createAuthtoken(edge.api, { acl }),
    );
    sessions.push(session);
    return session;
  }

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    web = await startHttpUpstream((_req, res) => res.end('service'));
    expect((await edge.api.post('/reserved_domains', { domain: 'leak.example' })).status).toBe(201);
    const vault = await edge.api.post('/vaults', { name: 'prod' });
    expect(vault.status).toBe(201);
    const secret = await edge.api.post('/secrets', {
      vault_id: vault.body.id,
      name: 'oidc',
      value: VALUE,
    });
    expect(secret.status).toBe(201);
  });
  afterAll(async () => {
    for (const s of sessions) await s.close().catch(() => undefined);
    await web?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  it('refuses the bind of an authtoken without the grant, naming the vault and the rule', async () => {
    const session = await agent(['bind:leak.example']);
    const err = await refusalOf(
      session.httpEndpoint().domain('leak.example').trafficPolicy(PRINT_SECRET).listen(),
    );
    // @ngrok/ngrok sets errorCode only for ERR_NGROK_nnn codes; ours ends the message, on its line.
    expect(err.message).toMatch(/\nERR_BURROW_SECRET_NOT_GRANTED$/);
    expect(err.message).toContain('TrafficPolicy: phase on_http_request, rule 0 ("leak")');
    expect(err.message).toContain('secrets.get("prod", "oidc")');
    expect(err.message).toContain("'secrets:read:prod'");
    // Nothing was bound: no endpoint serves the name.
    const endpoints = (await edge.api.get('/endpoints')).body.endpoints as Array<{ url: string }>;
    expect(endpoints.filter((e) => e.url.includes('leak.example'))).toEqual([]);
  });

  it('refuses a policy that computes on a secret, whatever the grant', async () => {
    const session = await agent(['bind:leak.example', 'secrets:read:prod']);
    const err = await refusalOf(
      session.httpEndpoint().domain('leak.example').trafficPolicy(LOG_DERIVED).listen(),
    );
    expect(err.errorCode).toBe('ERR_NGROK_2200');
    expect(err.message).toMatch(/rule 0 \("oracle"\).*may only be used whole/);
  });

  it('serves the secret where the authtoken has the grant', async () => {
    const session = await agent(['bind:leak.example', 'secrets:read:prod']);
    const listener = await session
      .httpEndpoint()
      .domain('leak.example')
      .trafficPolicy(PRINT_SECRET)
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    const reply = await curlUrl(listener.url()!, '/');
    expect(reply).toMatchObject({ status: 200, text: VALUE });
    await listener.close();
  });
});
