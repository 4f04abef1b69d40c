import { describe, expect, it } from 'vitest';
import { AgentError } from './agent-errors.js';
import { checkBindOptions, isSet } from './bind-options.js';
import { ResumptionKeys } from './session-resumption.js';

describe('isSet', () => {
  it('treats SDK empty values as unset and anything with content as set', () => {
    for (const v of [undefined, null, false, '', '  ', '0', 0, [], {}, { a: [], b: null, c: '' }]) {
      expect(isSet(v)).toBe(false);
    }
    for (const v of [true, 'x', 1, ['10.0.0.0/8'], { AllowCIDRs: ['10.0.0.0/8'] }]) {
      expect(isSet(v)).toBe(true);
    }
  });
});

describe('checkBindOptions', () => {
  const refusal = (opts: object, extra?: object) => {
    try {
      checkBindOptions(opts, extra);
    } catch (err) {
      expect(err).toBeInstanceOf(AgentError);
      return (err as AgentError).message;
    }
    return undefined;
  };

  it('accepts a plain endpoint with every middleware key present but off', () => {
    expect(
      refusal(
        {
          Domain: 'a.example.com',
          LocalUrlScheme: 'http',
          MutualTLSAtAgent: true,
          Compression: null,
          CircuitBreaker: { ErrorThreshold: 0 },
          IPRestriction: { AllowCIDRs: [], DenyCIDRs: [] },
          TrafficPolicy: null,
          ProxyProto: 0,
        },
        { Bindings: ['public'], IPPolicyRef: '' },
      ),
    ).toBeUndefined();
  });

  it('names the option it refuses, with the code', () => {
    expect(refusal({ MutualTLSCA: { mutual_tls_ca: 'AAAA' } })).toMatch(/Opts\.MutualTLSCA/);
    expect(refusal({ WebsocketTCPConverter: {} })).toMatch(/WebsocketTCPConverter/);
    // ProxyProto is enforced (bind-tunnel-options.ts proxyProtoOf, agent-tunnel.ts),
    // HostHeaderRewrite too (bind-tunnel-options.ts hostHeaderRewriteOf, http-forwarding.ts
    // rewrittenHost).
    expect(refusal({ ProxyProto: 2 })).toBeUndefined();
    expect(refusal({ HostHeaderRewrite: true })).toBeUndefined();
    expect(refusal({}, { Bindings: ['kubernetes'] })).toMatch(/"kubernetes"/);
    try {
      checkBindOptions({ MutualTLSCA: { mutual_tls_ca: 'AAAA' } }, undefined);
    } catch (err) {
      expect((err as AgentError).code).toBe('ERR_BURROW_UNSUPPORTED_OPTION');
    }
  });

  it('leaves TLSTermination and mutual TLS to terminate-tls on tls endpoints only', () => {
    const tls = {
      TLSTermination: { cert: 'Y2VydA==', key: 'a2V5' },
      MutualTLSAtEdge: { mutual_tls_ca: 'AAAA' },
    };
    expect(() => checkBindOptions(tls, undefined, 'tls')).not.toThrow();
    expect(() =>
      checkBindOptions({ MutualTLSCA: { mutual_tls_ca: 'AAAA' } }, undefined, 'tls'),
    ).not.toThrow();
    expect(() =>
      checkBindOptions({ MutualTLSCA: { mutual_tls_ca: 'AAAA' } }, undefined, 'https'),
    ).toThrow(/Opts\.MutualTLSCA.*tls endpoints only/);
    expect(() => checkBindOptions(tls, undefined, 'tcp')).toThrow(
      /Opts\.MutualTLSAtEdge|Opts\.TLSTermination/,
    );
  });

  it('leaves the options it enforces as policy rules to bind-option-rules.ts', () => {
    expect(refusal({ Auth: 'user:pass' })).toBeUndefined();
    expect(refusal({ CircuitBreaker: { error_threshold: 0.5 } })).toBeUndefined();
    expect(refusal({ IPRestriction: { allow_cidrs: ['10.0.0.0/8'] } })).toBeUndefined();
    expect(refusal({ Compression: {}, BasicAuth: { credentials: [] } })).toBeUndefined();
    expect(refusal({}, { IPPolicyRef: 'ipp_1' })).toBeUndefined();
    expect(refusal({ OAuth: { provider: 'google', client_id: 'c' } })).toBeUndefined();
    expect(refusal({ OIDC: { issuer_url: 'https://id.example' } })).toBeUndefined();
  });

  it('leaves traffic policies to bind-traffic-policy.ts, which enforces them', () => {
    expect(refusal({ TrafficPolicy: 'on_http_request: []' })).toBeUndefined();
    expect(refusal({ Policy: { Inbound: [{ Actions: [{ Type: 'deny' }] }] } })).toBeUndefined();
  });
});

describe('ResumptionKeys', () => {
  const keys = new ResumptionKeys(Buffer.alloc(32, 7));

  it('verifies cookies only for their session and credential', () => {
    const cookie = keys.issueCookie({ sessionId: 'ts_a', credentialId: 'cr_1' });
    expect(keys.verifyCookie(cookie, 'ts_a', 'cr_1')).toBe(true);
    expect(keys.verifyCookie(cookie, 'ts_b', 'cr_1')).toBe(false);
    expect(keys.verifyCookie(cookie, 'ts_a', 'cr_2')).toBe(false);
    expect(new ResumptionKeys(Buffer.alloc(32, 8)).verifyCookie(cookie, 'ts_a', 'cr_1')).toBe(
      false,
    );
    const [payload] = cookie.split('.');
    expect(keys.verifyCookie(`${payload}.AAAA`, 'ts_a', 'cr_1')).toBe(false);
    expect(keys.verifyCookie(undefined, 'ts_a', 'cr_1')).toBe(false);
  });

  it('restores a bind grant for the same bind id and credential only', () => {
    const grant = { bindId: 'b1', credentialId: 'cr_1', proto: 'tcp', port: 20005, random: true };
    const token = keys.issueBindToken(grant);
    expect(keys.verifyBindToken(token, 'b1', 'cr_1')).toEqual({ ...grant, hostname: undefined });
    expect(keys.verifyBindToken(token, 'b2', 'cr_1')).toBeUndefined();
    expect(keys.verifyBindToken(token, 'b1', 'cr_9')).toBeUndefined();
    const cookie = keys.issueCookie({ sessionId: 'b1', credentialId: 'cr_1' });
    expect(keys.verifyBindToken(cookie, 'b1', 'cr_1')).toBeUndefined();
  });
});
