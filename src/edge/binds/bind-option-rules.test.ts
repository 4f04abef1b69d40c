import { describe, expect, it } from 'vitest';
import { bindPolicy } from '../../../test/support/policy-fixtures.js';
import { cookieKey, seal } from '../../policy/actions/auth-cookies.js';
import type { AgentError } from './agent-errors.js';
import { optionRules } from './bind-option-rules.js';
import { mergedPolicyText } from './bind-traffic-policy.js';

/** What @ngrok/ngrok 1.7.0 (ngrok-rust) sends for `.basicAuth().allowCidr().requestHeader()…`. */
const RUST_OPTS = {
  Domain: 'app.burrow.test',
  BasicAuth: { credentials: [{ username: 'ops', cleartext_password: 'correct-horse' }] },
  IPRestriction: { allow_cidrs: ['10.0.0.0/8'], deny_cidrs: ['10.9.0.0/16'] },
  RequestHeaders: { add: ['x-env:dev'], remove: ['x-debug'] },
  ResponseHeaders: { add: ['x-served-by:burrow'] },
  Compression: {},
  CircuitBreaker: { error_threshold: 0.5 },
  UserAgentFilter: { allow: ['^curl/'], deny: ['bot'] },
  WebhookVerification: { provider: 'github', secret: 'shh' },
  OAuth: null,
  OIDC: null,
};

describe('optionRules', () => {
  it('turns each option into the action ngrok documents for it, in a fixed order', () => {
    const rules = optionRules(RUST_OPTS, undefined, 'https')!;
    expect(rules.on_http_request.map((r) => r.name)).toEqual([
      'Opts.IPRestriction',
      'Opts.UserAgentFilter',
      'Opts.CircuitBreaker',
      'Opts.WebhookVerification',
      'Opts.BasicAuth',
      'Opts.RequestHeaders',
    ]);
    expect(rules.on_http_request[4]!.actions[0]).toEqual({
      type: 'basic-auth',
      config: { credentials: ['ops:correct-horse'] },
    });
    expect(rules.on_http_request[0]!.actions[0]!.config).toEqual({
      allow: ['10.0.0.0/8'],
      deny: ['10.9.0.0/16'],
    });
    expect(rules.on_http_request[5]!.actions).toEqual([
      { type: 'remove-headers', config: { headers: ['x-debug'] } },
      { type: 'add-headers', config: { headers: { 'x-env': 'dev' } } },
    ]);
    expect(rules.on_http_response.map((r) => r.name)).toEqual([
      'Opts.ResponseHeaders',
      'Opts.Compression',
    ]);
    expect(rules.on_tcp_connect).toEqual([]);
  });

  it('restricts TCP and TLS endpoints at connect, with Extra.IPPolicyRef joining', () => {
    const rules = optionRules(
      { IPRestriction: { allow_cidrs: ['192.0.2.0/24'] } },
      { IPPolicyRef: 'ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52' },
      'tcp',
    )!;
    expect(rules.on_tcp_connect[0]!.actions[0]!.config).toEqual({
      allow: ['192.0.2.0/24'],
      ip_policies: ['ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52'],
    });
  });

  it('gives nothing for options that are all off, as SDKs send them', () => {
    expect(
      optionRules(
        { BasicAuth: null, Compression: null, IPRestriction: { allow_cidrs: [] }, Auth: '' },
        { IPPolicyRef: '' },
        'https',
      ),
    ).toBeUndefined();
  });

  it('keeps ${ in header values literal, and takes the older Auth flag', () => {
    const rules = optionRules(
      { Auth: 'user:longenough', RequestHeaders: { add: ['x-a:${conn.client_ip}'] } },
      undefined,
      'http',
    )!;
    expect(rules.on_http_request[1]!.actions[0]!.config).toEqual({
      headers: { 'x-a': '$${conn.client_ip}' },
    });
    expect(rules.on_http_request[0]!.actions[0]!.config).toEqual({
      credentials: ['user:longenough'],
    });
  });

  it('refuses malformed options with the code and the option named', () => {
    const refusal = (opts: object): AgentError => {
      try {
        optionRules(opts, undefined, 'https');
      } catch (err) {
        return err as AgentError;
      }
      throw new Error('expected a refusal');
    };
    const hashed = refusal({
      BasicAuth: { credentials: [{ username: 'a', hashed_password: 'AAAA' }] },
    });
    expect(hashed.code).toBe('ERR_BURROW_UNSUPPORTED_OPTION');
    expect(hashed.message).toMatch(/Opts\.BasicAuth.*hashed passwords/);
    expect(refusal({ CircuitBreaker: { error_threshold: 3 } }).message).toMatch(/CircuitBreaker/);
    expect(refusal({ RequestHeaders: { add: ['no-colon'] } }).message).toMatch(/name:value/);
  });

  it('puts the rules before the agent policy, in either of its forms', () => {
    const rules = optionRules({ Auth: 'user:longenough' }, undefined, 'https')!;
    const merged = JSON.parse(
      mergedPolicyText(
        rules,
        '{"inbound": [{"name": "mine", "actions": [{"type": "deny"}]}]}',
        'https',
      ),
    ) as Record<string, Array<{ name: string }>>;
    expect(merged.on_http_request!.map((r) => r.name)).toEqual(['Opts.BasicAuth', 'mine']);
  });

  it('enforces OIDC as the openid-connect action, with a deny rule for its allow lists', () => {
    const rules = optionRules(
      {
        OIDC: {
          issuer_url: 'https://id.burrow.test',
          client_id: 'app',
          client_secret: 'the-client-secret',
          scopes: ['groups'],
          allow_emails: ['Alice@Example.com'],
          allow_domains: ['corp.example'],
        },
        OAuth: null,
      },
      undefined,
      'https',
    )!;
    expect(rules.on_http_request).toEqual([
      {
        name: 'Opts.OIDC',
        expressions: [],
        actions: [
          {
            type: 'openid-connect',
            config: {
              issuer_url: 'https://id.burrow.test',
              client_id: 'app',
              client_secret: 'the-client-secret',
              scopes: ['groups'],
            },
          },
        ],
      },
      {
        name: 'Opts.OIDC allow list',
        expressions: [
          '!(actions.ngrok.oidc.identity.email.lowerAscii() in ["alice@example.com"] || actions.ngrok.oidc.identity.email.lowerAscii().endsWith("@corp.example"))',
        ],
        actions: [{ type: 'deny', config: { status_code: 403 } }],
      },
    ]);
  });

  it('lets the allow list decide by the email of the session', async () => {
    const rules = optionRules(
      {
        OIDC: {
          issuer_url: 'https://id.burrow.test',
          client_id: 'app',
          client_secret: 'the-client-secret',
          allow_emails: ['alice@example.com'],
          allow_domains: ['@corp.example'],
        },
      },
      undefined,
      'https',
    )!;
    const { runner } = bindPolicy(mergedPolicyText(rules, undefined, 'https'), 'https');
    // The session cookie every node of the edge would have set after a login.
    const key = cookieKey(
      'the-client-secret',
      'openid-connect\nhttps://id.burrow.test/\napp\noidc',
    );
    const status = async (email: string) => {
      const now = Date.now();
      const session = { sub: 's', email, name: '', iat: now, seen: now, exp: now + 60_000 };
      const d = await runner.onHttpRequest({
        conn: { client_ip: '192.0.2.1' },
        req: {
          method: 'GET',
          url: '/',
          scheme: 'https',
          headers: {
            host: 'app.burrow.test',
            cookie: `burrow_oidc=${seal(key, 'burrow_oidc', session)}`,
          },
        },
      });
      return d.kind === 'respond' ? d.status : 200;
    };
    expect(await status('Alice@example.com')).toBe(200);
    expect(await status('bob@corp.example')).toBe(200);
    expect(await status('eve@example.com')).toBe(403);
    expect(await status('eve@notcorp.example')).toBe(403);
  });

  it('enforces OAuth as the oauth action, and refuses what it cannot use', () => {
    const rules = optionRules(
      {
        OAuth: {
          provider: 'github',
          client_id: 'Iv1.abc',
          client_secret: 'shh',
          allow_domains: ['example.com'],
        },
      },
      undefined,
      'https',
    )!;
    expect(rules.on_http_request.map((r) => r.name)).toEqual([
      'Opts.OAuth',
      'Opts.OAuth allow list',
    ]);
    expect(rules.on_http_request[0]!.actions[0]).toEqual({
      type: 'oauth',
      config: { provider: 'github', client_id: 'Iv1.abc', client_secret: 'shh' },
    });
    expect(rules.on_http_request[1]!.expressions).toEqual([
      '!(actions.ngrok.oauth.identity.email.lowerAscii().endsWith("@example.com"))',
    ]);
    const sealed = (() => {
      try {
        optionRules(
          { OAuth: { provider: 'google', sealed_client_secret: 'AAAA' } },
          undefined,
          'https',
        );
      } catch (err) {
        return err as AgentError;
      }
      throw new Error('expected a refusal');
    })();
    expect(sealed.message).toMatch(/Opts\.OAuth.*sealed client secrets/);
    // Without a client secret the option translates, and compiling names the missing key.
    const noSecret = optionRules({ OAuth: { provider: 'google' } }, undefined, 'https')!;
    expect(() => bindPolicy(mergedPolicyText(noSecret, undefined, 'https'), 'https')).toThrow(
      /config\.client_id is required/,
    );
  });
});

describe('optionRules on tls endpoints: TLSTermination and mutual TLS', () => {
  const CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  const KEY = '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n';
  const CA = '-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n';
  const b64 = (text: string) => Buffer.from(text).toString('base64');

  it('becomes one terminate-tls rule after the IP restriction (base64 PEM bytes decoded)', () => {
    const rules = optionRules(
      {
        IPRestriction: { allow_cidrs: ['10.0.0.0/8'] },
        TLSTermination: { cert: b64(CERT), key: b64(KEY) },
        MutualTLSAtEdge: { mutual_tls_ca: b64(CA) },
      },
      undefined,
      'tls',
    )!;
    expect(rules.on_tcp_connect.map((r) => r.name)).toEqual([
      'Opts.IPRestriction',
      'Opts.TLSTermination, Opts.MutualTLSAtEdge',
    ]);
    expect(rules.on_tcp_connect[1]!.actions).toEqual([
      {
        type: 'terminate-tls',
        config: {
          server_certificate: CERT,
          server_private_key: KEY,
          mutual_tls_certificate_authorities: [CA],
        },
      },
    ]);
  });

  it("terminates with the edge's certificate for a TLSTermination without a key pair, or mutual TLS alone", () => {
    expect(optionRules({ TLSTermination: {} }, undefined, 'tls')!.on_tcp_connect).toEqual([
      {
        name: 'Opts.TLSTermination',
        expressions: [],
        actions: [{ type: 'terminate-tls', config: {} }],
      },
    ]);
    const mtls = optionRules({ MutualTLSCA: { MutualTLSCA: CA } }, undefined, 'tls')!;
    expect(mtls.on_tcp_connect[0]).toMatchObject({
      name: 'Opts.MutualTLSCA',
      actions: [{ type: 'terminate-tls', config: { mutual_tls_certificate_authorities: [CA] } }],
    });
    expect(optionRules({ TLSTermination: null, MutualTLSAtEdge: null }, undefined, 'tls')).toBe(
      undefined,
    );
  });

  it('refuses what it cannot turn into PEM, naming the option', () => {
    const refusal = (opts: Parameters<typeof optionRules>[0]) => {
      try {
        optionRules(opts, undefined, 'tls');
      } catch (err) {
        return (err as AgentError).message;
      }
      return undefined;
    };
    expect(refusal({ TLSTermination: { cert: b64(CERT) } })).toMatch(
      /Opts\.TLSTermination.*both cert and key/,
    );
    expect(refusal({ TLSTermination: { cert: 'AA', key: 'BB' } })).toMatch(
      /Opts\.TLSTermination.*cert is not PEM/,
    );
    expect(refusal({ TLSTermination: { sealed_key: 'c2VhbGVk' } })).toMatch(/sealed keys/);
    expect(refusal({ MutualTLSAtEdge: { mutual_tls_ca: '%%%' } })).toMatch(
      /Opts\.MutualTLSAtEdge.*base64/,
    );
  });
});
