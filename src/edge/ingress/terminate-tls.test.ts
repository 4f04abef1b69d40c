import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientPki } from '../../../test/support/client-certificates.js';
import {
  startEchoServer,
  tlsExchange,
  type EchoServer,
} from '../../../test/support/edge-traffic.js';
import { fakeTunnel, startTestIngress, type TestIngress } from '../../../test/support/ingress.js';
import { withPolicy } from '../../../test/support/policy.js';
import { PolicyEventLog } from '../../policy/index.js';

/**
 * terminate-tls on TLS endpoints, over real sockets: the HTTPS port ends the client's TLS with the
 * edge's certificate (or the policy's), enforces versions and client certificates, and the agent
 * gets plaintext.
 */
let t: TestIngress;
let agent: EchoServer;
const pki = clientPki('Endpoint Client CA');
const other = clientPki('Someone Else');

beforeAll(async () => {
  t = await startTestIngress();
  agent = await startEchoServer('agent');
});

afterAll(async () => {
  await t.close();
  await agent.close();
  pki.cleanup();
  other.cleanup();
});

let n = 0;

/** A tls endpoint with `policy`, served by the plaintext echo "agent"; returns its name. */
function endpoint(policy: unknown, events?: PolicyEventLog) {
  const hostname = `term${++n}.burrow.test`;
  const tunnel = withPolicy(
    fakeTunnel({ proto: 'tls', hostname, upstreamPort: agent.port }),
    JSON.stringify(policy),
    events,
  );
  t.registry.addTunnel(tunnel);
  const hello = (extra: Partial<Parameters<typeof tlsExchange>[0]> = {}) =>
    tlsExchange({ port: t.httpsPort, servername: hostname, ca: t.ca.certPem, ...extra });
  return { tunnel, hostname, hello };
}

const terminate = (config: unknown, ...more: unknown[]) => ({
  on_tcp_connect: [{ actions: [{ type: 'terminate-tls', config }] }, ...more],
});

describe('terminate-tls on a TLS endpoint', () => {
  it("ends TLS with the edge's certificate and relays plaintext to the agent", async () => {
    const { tunnel, hostname, hello } = endpoint(terminate(null));
    const seen = await hello();
    expect(seen).toMatchObject({
      text: 'agent:ping',
      authorized: true,
      peerCn: hostname,
      protocol: 'TLSv1.3',
    });
    expect(tunnel.connects).toEqual([
      expect.objectContaining({ proto: 'tls', passthroughTls: false }),
    ]);
  });

  it('serves the certificate of the policy when it has one', async () => {
    const own = pki.issue('own-cert.burrow.test');
    const { hello } = endpoint(
      terminate({ server_certificate: own.certPem, server_private_key: own.keyPem }),
    );
    const seen = await hello({ ca: pki.ca.certPem });
    expect(seen).toMatchObject({ text: 'agent:ping', peerCn: 'own-cert.burrow.test' });
  });

  it('refuses versions outside min_version..max_version', async () => {
    const { hello } = endpoint(terminate({ min_version: '1.3' }));
    expect((await hello({ maxVersion: 'TLSv1.2' })).served).toBe(false);
    expect((await hello({ minVersion: 'TLSv1.3' })).text).toBe('agent:ping');
    const old = endpoint(terminate({ max_version: '1.2' }));
    expect(await old.hello()).toMatchObject({ text: 'agent:ping', protocol: 'TLSv1.2' });
  });

  it('with client CAs, refuses clients without a certificate or with one from another CA', async () => {
    const { hello, tunnel } = endpoint(
      terminate({ mutual_tls_certificate_authorities: [pki.ca.certPem] }),
    );
    expect((await hello()).served).toBe(false);
    expect((await hello({ cert: other.issue('mallory') })).served).toBe(false);
    expect(tunnel.connects).toEqual([]);
    expect((await hello({ cert: pki.issue('alice') })).text).toBe('agent:ping');
    expect(tunnel.connects).toHaveLength(1);
  });

  it('require-any takes any certificate but not none; request takes none', async () => {
    const any = endpoint(terminate({ mutual_tls_verification_strategy: 'require-any' }));
    expect((await any.hello()).served).toBe(false);
    expect((await any.hello({ cert: other.issue('mallory') })).text).toBe('agent:ping');
    const request = endpoint(terminate({ mutual_tls_verification_strategy: 'request' }));
    expect((await request.hello()).text).toBe('agent:ping');
  });

  it('lets later rules see conn.tls.client.* and the negotiated version', async () => {
    const events = new PolicyEventLog();
    const { hello, tunnel } = endpoint(
      terminate(
        { mutual_tls_certificate_authorities: [pki.ca.certPem] },
        {
          name: 'log who',
          actions: [
            {
              type: 'log',
              config: {
                metadata: {
                  cn: '${conn.tls.client.subject.common_name}',
                  issuer: '${conn.tls.client.issuer.common_name}',
                  version: '${conn.tls.version}',
                },
              },
            },
          ],
        },
        {
          name: 'alice only',
          expressions: ["conn.tls.client.subject.common_name != 'alice'"],
          actions: [{ type: 'deny' }],
        },
      ),
      events,
    );
    expect((await hello({ cert: pki.issue('bob') })).served).toBe(false);
    expect((await hello({ cert: pki.issue('alice') })).text).toBe('agent:ping');
    expect(tunnel.connects).toHaveLength(1);
    const logged = events
      .eventsFor(tunnel.id)
      .filter((e) => e.outcome === 'log')
      .map((e) => e.metadata);
    // Newest first.
    expect(logged).toEqual([
      { cn: 'alice', issuer: 'Endpoint Client CA', version: '1.3' },
      { cn: 'bob', issuer: 'Endpoint Client CA', version: '1.3' },
    ]);
  });

  it('rules before terminate-tls still see the ClientHello, and can refuse before any handshake', async () => {
    const { hello, tunnel } = endpoint({
      on_tcp_connect: [
        { expressions: ["conn.tls.version == '1.2'"], actions: [{ type: 'deny' }] },
        { actions: [{ type: 'terminate-tls' }] },
      ],
    });
    // A client offering at most TLS 1.2 is denied from its ClientHello.
    expect(await hello({ maxVersion: 'TLSv1.2' })).toMatchObject({
      served: false,
      peerCn: undefined,
    });
    expect((await hello()).text).toBe('agent:ping');
    expect(tunnel.connects).toHaveLength(1);
  });
});
