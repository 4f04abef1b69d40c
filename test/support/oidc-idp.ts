import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** A running OpenID provider for tests, and how to stop it. */
export interface TestIdp {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /**
   * An openid-connect policy action that logs in with this provider, `config` added to its config.
   * @example { on_http_request: [{ actions: [idp.action({ allow_cors_preflight: true })] }] }
   */
  action(config?: Record<string, unknown>): {
    type: 'openid-connect';
    config: Record<string, unknown>;
  };
  close(): Promise<void>;
}

/**
 * Start oidc-provider on 127.0.0.1 (a random port): one confidential client with `redirectUris`,
 * the development login form (any login, any password; the login becomes the account id), no
 * consent screen, PKCE required. An account's email is `<login>@<emailDomain(login)>`, its name
 * the login capitalised. The edge reaches it only where loopback egress is allowed: start a
 * server process with `--egress-allow 127.0.0.1`, or call core/egress-guard's `configureEgress`
 * in the test process.
 * @example const idp = await startTestIdp({ redirectUris: ['http://app.burrow.test:8080/ngrok/callback'] });
 */
export async function startTestIdp(options: {
  redirectUris: string[];
  emailDomain?: (login: string) => string;
}): Promise<TestIdp> {
  const server: Server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'burrow-test';
  const clientSecret = 'a-client-secret-of-the-test-idp-0123456789';
  const domain = options.emailDomain ?? (() => 'example.com');
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: options.redirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    cookies: { keys: ['test-idp-cookie-key-0123456789abcdef'] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    ttl: {
      AccessToken: 600,
      AuthorizationCode: 60,
      Grant: 3600,
      IdToken: 600,
      Interaction: 600,
      Session: 3600,
    },
    findAccount: (_ctx: unknown, sub: string) => ({
      accountId: sub,
      claims: () => ({
        sub,
        email: `${sub}@${domain(sub)}`,
        email_verified: true,
        name: sub.charAt(0).toUpperCase() + sub.slice(1),
      }),
    }),
    // A first-party client: grant what it asks for without a consent screen.
    async loadExistingGrant(ctx: {
      oidc: {
        client: { clientId: string };
        session: { accountId: string; grantIdFor(id: string): string | undefined };
        provider: {
          Grant: {
            find(id: string): Promise<unknown>;
            new (init: Record<string, unknown>): {
              addOIDCScope(scope: string): void;
              save(): Promise<string>;
            };
          };
        };
      };
    }) {
      const { client, session, provider: p } = ctx.oidc;
      const existing = session.grantIdFor(client.clientId);
      if (existing) return p.Grant.find(existing);
      const grant = new p.Grant({ clientId: client.clientId, accountId: session.accountId });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    action: (config = {}) => ({
      type: 'openid-connect',
      config: { issuer_url: issuer, client_id: clientId, client_secret: clientSecret, ...config },
    }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
