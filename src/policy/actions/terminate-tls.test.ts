import { X509Certificate } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../core/errors.js';
import { clientPki } from '../../../test/support/client-certificates.js';
import { compilePolicy } from '../compile.js';
import type { PolicyProtocol } from '../parse.js';
import type { TlsTermination } from '../runner.js';
import { validatePolicy } from '../validate.js';

const FIELD = 'traffic_policy.value';
const pki = clientPki('Terminate TLS Test CA');
const server = pki.issue('server.burrow.test');
const alice = pki.issue('alice');
const other = clientPki('Someone Else');
const stranger = other.issue('mallory');

afterAll(() => {
  pki.cleanup();
  other.cleanup();
});

const terminate = (config: unknown, extra: unknown[] = []) =>
  JSON.stringify({
    on_tcp_connect: [{ name: 'tls', actions: [{ type: 'terminate-tls', config }] }, ...extra],
  });

function refusal(text: string, protocol: PolicyProtocol = 'tls'): ValidationError {
  try {
    validatePolicy(text, protocol, FIELD);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error(`expected ${text} to be refused on ${protocol}`);
}

describe('terminate-tls validation', () => {
  it('accepts no config, versions, a certificate with its key, and CA PEMs', () => {
    expect(() => validatePolicy(terminate(null), 'tls', FIELD)).not.toThrow();
    const full = terminate({
      min_version: '1.3',
      max_version: '1.3',
      server_certificate: server.certPem,
      server_private_key: server.keyPem,
      mutual_tls_certificate_authorities: [pki.ca.certPem, other.ca.certPem],
      mutual_tls_verification_strategy: 'require-and-verify',
    });
    expect(() => validatePolicy(full, 'tls', FIELD)).not.toThrow();
  });

  it.each([
    [{ min_version: '1.0' }, /config\.min_version must be "1\.2" or "1\.3", not "1\.0"/],
    [{ max_version: 1.3 }, /config\.max_version must be a string/],
    [{ min_version: '1.3', max_version: '1.2' }, /config\.min_version \(1\.3\) must not be above/],
    [{ server_certificate: server.certPem }, /config\.server_private_key is required/],
    [
      { server_certificate: 'not a pem', server_private_key: server.keyPem },
      /config\.server_certificate must be a PEM certificate/,
    ],
    [
      {
        server_certificate: server.certPem.replace(/\n[A-Za-z0-9+/]{10}/, '\nAAAAAAAAAA'),
        server_private_key: server.keyPem,
      },
      /config\.server_certificate has a certificate \(block 0\) that does not parse/,
    ],
    [
      { server_certificate: server.certPem, server_private_key: 'garbage' },
      /config\.server_private_key must be a PEM private key/,
    ],
    [
      { server_certificate: server.certPem, server_private_key: alice.keyPem },
      /config\.server_private_key does not match the key of server_certificate/,
    ],
    [
      { mutual_tls_certificate_authorities: ['ca_2bhsNc9X6FO3i2wzTOgIH8jAe52'] },
      /config\.mutual_tls_certificate_authorities\[0\] names a certificate authority by id/,
    ],
    [
      { mutual_tls_certificate_authorities: [pki.ca.certPem, alice.certPem] },
      /config\.mutual_tls_certificate_authorities\[1\] holds a certificate that is not a CA \(CN=alice\)/,
    ],
    [
      { mutual_tls_certificate_authorities: [] },
      /config\.mutual_tls_certificate_authorities must have 1 to 100 entries/,
    ],
    [
      { mutual_tls_verification_strategy: 'verify-if-given' },
      /config\.mutual_tls_verification_strategy must be one of require-and-verify, require-any, request/,
    ],
    [
      { mutual_tls_verification_strategy: 'require-and-verify' },
      /require-and-verify needs mutual_tls_certificate_authorities/,
    ],
    [{ ciphers: ['x'] }, /unknown config key 'ciphers'/],
  ])('refuses %j naming the key', (config, message) => {
    const err = refusal(terminate(config));
    expect(err.message).toMatch(
      /phase on_tcp_connect, rule 0 \("tls"\), action 0 \(terminate-tls\)/,
    );
    expect(err.message).toMatch(message);
  });

  it('runs in on_tcp_connect of TLS endpoints only (2205)', () => {
    for (const protocol of ['http', 'https', 'tcp'] as const) {
      const err = refusal(terminate(null), protocol);
      expect(err.code).toBe('ERR_NGROK_2205');
      expect(err.message).toContain(
        `action type 'terminate-tls' is not supported for protocol ${protocol}: it works on TLS endpoints only`,
      );
    }
    const inRequest = refusal(
      JSON.stringify({ on_http_request: [{ actions: [{ type: 'terminate-tls' }] }] }),
      'https',
    );
    expect(inRequest.code).toBe('ERR_NGROK_2205');
  });
});

describe('terminate-tls at run time', () => {
  const endpoint = { protocol: 'tls' };
  const later = {
    name: 'only alice',
    expressions: ["conn.tls.client.subject.common_name != 'alice'"],
    actions: [{ type: 'deny' }],
  };

  function run(text: string, client: X509Certificate | undefined | 'fail') {
    const runner = compilePolicy(text, { protocol: 'tls' }).bind({ ownerId: 'ep_test' });
    const asked: TlsTermination[] = [];
    return {
      asked,
      decision: runner.onTcpConnect({
        conn: { client_ip: '192.0.2.1', tls: { sni: 'app.burrow.test', version: '1.3' } },
        endpoint,
        terminateTls: (settings) => {
          asked.push(settings);
          if (client === 'fail') return Promise.resolve(undefined);
          return Promise.resolve({ version: 'TLSv1.3', sni: 'app.burrow.test', client });
        },
      }),
    };
  }

  it('hands the parsed settings to the ingress, and later rules see the client certificate', async () => {
    const text = terminate(
      { min_version: '1.3', mutual_tls_certificate_authorities: [pki.ca.certPem] },
      [later],
    );
    const passed = run(text, new X509Certificate(alice.certPem));
    expect(await passed.decision).toMatchObject({ kind: 'continue', tlsTerminated: true });
    expect(passed.asked).toEqual([
      {
        minVersion: '1.3',
        maxVersion: '1.3',
        certificate: undefined,
        clientCas: [new X509Certificate(pki.ca.certPem).toString()],
        clientAuth: 'require-and-verify',
      },
    ]);
    const refused = run(text, new X509Certificate(stranger.certPem));
    expect(await refused.decision).toMatchObject({ kind: 'close' });
  });

  it('exposes subject, issuer, serial and validity as conn.tls.client.*', async () => {
    const cert = new X509Certificate(alice.certPem);
    const text = terminate(null, [
      {
        expressions: [
          "conn.tls.client.issuer.common_name == 'Terminate TLS Test CA'",
          `conn.tls.client.serial_number == '${cert.serialNumber}'`,
          'conn.tls.client.validity.not_after > time.now',
          "conn.tls.version == '1.3'",
          'conn.tls.client.san.dns_names.size() == 0',
        ],
        actions: [
          {
            type: 'set-vars',
            config: { vars: [{ who: '${conn.tls.client.subject.common_name}' }] },
          },
        ],
      },
    ]);
    const decision = await run(text, cert).decision;
    expect(decision).toMatchObject({ kind: 'continue', vars: { who: 'alice' } });
  });

  it('closes when the handshake fails or the ingress cannot terminate', async () => {
    expect(await run(terminate(null), 'fail').decision).toMatchObject({ kind: 'close' });
    const runner = compilePolicy(terminate(null), { protocol: 'tls' }).bind({ ownerId: 'ep_x' });
    const decision = await runner.onTcpConnect({ conn: { client_ip: '192.0.2.1' }, endpoint });
    expect(decision.kind).toBe('close');
  });
});
