import { describe, expect, it } from 'vitest';
import {
  NGROK_EXAMPLE_AUTHTOKEN,
  NGROK_V2_EXAMPLE,
  NGROK_V3_ENDPOINT,
} from '../../test/support/ngrok-examples.js';
import { mergeConfigSources, NgrokConfigError, parseConfigText } from './ngrok-config.js';

const read = (text: string, path = 'ngrok.yml') =>
  mergeConfigSources([parseConfigText(text, path)]);

/** ngrok's traffic policy getting-started endpoint, under version 3 with its agent's authtoken. */
const NGROK_V3_EXAMPLE = `version: 3
agent:
  authtoken: ${NGROK_EXAMPLE_AUTHTOKEN}
${NGROK_V3_ENDPOINT}`;

function failure(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(NgrokConfigError);
    return (err as Error).message;
  }
  throw new Error('expected an NgrokConfigError');
}

describe('ngrok.yml version 2 and 3', () => {
  it("reads ngrok's version 2 example: the authtoken and the tunnel, api_key noted as ignored", () => {
    const config = read(NGROK_V2_EXAMPLE);
    expect(config.version).toBe(2);
    expect(config.authtoken).toBe('4nq9771bPxe8ctg7LKr_2ClH7Y15Zqe4bWLWF9p');
    expect(config.ignored).toEqual(['ngrok.yml:3 (api_key)']);
    expect(config.tunnels).toMatchObject([
      { name: 'basic', kind: 'tunnel', proto: 'http', addr: '80', inspect: true },
    ]);
  });

  it("reads ngrok's version 3 endpoint with its traffic policy", () => {
    const config = read(NGROK_V3_EXAMPLE);
    expect(config.version).toBe(3);
    expect(config.authtoken).toBe('4nq9771bPxe8ctg7LKr_2ClH7Y15Zqe4bWLWF9p');
    const [endpoint] = config.tunnels;
    expect(endpoint).toMatchObject({
      name: 'my-agent-endpoint',
      kind: 'endpoint',
      proto: 'http',
      addr: '80',
    });
    expect(JSON.parse(endpoint!.trafficPolicy!)).toMatchObject({
      on_http_request: [{ actions: [{ type: 'custom-response' }] }],
    });
  });

  it('maps the session keys of both versions and the endpoint url forms', () => {
    const v2 = read(
      'server_addr: edge.example.com:4443\nroot_cas: /etc/burrow/ca.pem\nweb_addr: 127.0.0.1:4100\ntunnels:\n  ssh: {proto: tcp, addr: 22, remote_addr: "tcp.example.com:20001"}\n  site: {proto: http, addr: 3000, hostname: app.example.com, schemes: [http], basic_auth: ["ops:correct-horse"], inspect: false}\n',
    );
    expect(v2).toMatchObject({
      serverAddr: 'edge.example.com:4443',
      caFile: '/etc/burrow/ca.pem',
      webAddr: '127.0.0.1:4100',
    });
    expect(v2.tunnels[0]).toMatchObject({ proto: 'tcp', remoteAddr: 'tcp.example.com:20001' });
    expect(v2.tunnels[1]).toMatchObject({
      proto: 'http',
      domain: 'app.example.com',
      scheme: 'http',
      inspect: false,
    });
    expect(v2.tunnels[1]!.trafficPolicy).toContain('basic-auth');

    const v3 = read(
      'version: "3"\nagent:\n  connect_url: tls://edge.example.com:4443\n  connect_cas: host\n  web_addr: false\nendpoints:\n  - {name: a, url: "https://a.example.com", upstream: {url: "http://localhost:8080", protocol: http1}, bindings: [public], pooling_enabled: true}\n  - {name: b, url: "tcp://tcp.example.com:20002", upstream: {url: 5432}}\n  - {name: c, url: "tls://c.example.com", upstream: {url: 8443}}\n',
    );
    expect(v3).toMatchObject({
      serverAddr: 'edge.example.com:4443',
      caFile: undefined,
      webAddr: false,
    });
    expect(
      v3.tunnels.map((t) => [t.name, t.proto, t.domain ?? t.remoteAddr, t.poolingEnabled]),
    ).toEqual([
      ['a', 'http', 'a.example.com', true],
      ['b', 'tcp', 'tcp.example.com:20002', false],
      ['c', 'tls', 'c.example.com', false],
    ]);
  });

  it('merges several files: later keys win, tunnels by name', () => {
    const merged = mergeConfigSources([
      parseConfigText(
        'authtoken: one\ntunnels:\n  a: {proto: http, addr: 1}\n  b: {proto: http, addr: 2}\n',
        'base.yml',
      ),
      parseConfigText(
        'version: 3\nagent: {authtoken: two}\ntunnels:\n  b: {proto: tcp, addr: 3}\n',
        'over.yml',
      ),
    ]);
    expect(merged.authtoken).toBe('two');
    expect(merged.tunnels.map((t) => [t.name, t.proto, t.addr])).toEqual([
      ['a', 'http', '1'],
      ['b', 'tcp', '3'],
    ]);
  });

  it('an unknown or unsupported key is an error naming the file, line and key', () => {
    expect(failure(() => read('version: 2\nauthtoken: x\nfrobnicate: 1\n'))).toBe(
      'ngrok.yml:3 (frobnicate): unknown key frobnicate',
    );
    expect(
      failure(() =>
        read('version: 2\ntunnels:\n  web:\n    proto: http\n    addr: 80\n    crt: /tmp/a.crt\n'),
      ),
    ).toMatch(
      /^ngrok\.yml:6 \(tunnels\.web\.crt\): crt is not supported: TLS is terminated by the edge/,
    );
    expect(failure(() => read('version: 3\nagent:\n  proxy_url: http://proxy:3128\n'))).toMatch(
      /^ngrok\.yml:3 \(agent\.proxy_url\): proxy_url is not supported/,
    );
    expect(failure(() => read('version: 3\nauthtoken: x\n'))).toBe(
      'ngrok.yml:2 (authtoken): unknown key authtoken (in version 3 it goes under agent:)',
    );
    expect(
      failure(() =>
        read('version: 3\nendpoints:\n  - name: x\n    upstream: {url: 80, proxy_protocol: 2}\n'),
      ),
    ).toMatch(/^ngrok\.yml:4 \(endpoints\[0\]\.upstream\.proxy_protocol\):/);
    expect(
      failure(() =>
        read(
          'tunnels:\n  w:\n    proto: http\n    addr: 80\n    ip_restriction:\n      allow_cidrs: [10.0.0.0/8, nonsense]\n',
        ),
      ),
    ).toMatch(/^ngrok\.yml:6 \(tunnels\.w\.ip_restriction\.allow_cidrs\[1\]\):/);
    expect(failure(() => read('tunnels:\n  w: {proto: udp, addr: 80}\n'))).toMatch(
      /\(tunnels\.w\.proto\): must be http, tcp or tls/,
    );
    // A labeled tunnel: proto may be left out, but not be another protocol.
    expect(read('tunnels:\n  e: {labels: [app=ssh], addr: 22}\n').tunnels[0]).toMatchObject({
      proto: 'labeled',
      labels: { app: 'ssh' },
    });
    expect(
      failure(() => read('tunnels:\n  e: {labels: [app=ssh], proto: udp, addr: 22}\n')),
    ).toMatch(/\(tunnels\.e\.proto\): must be http, tcp or tls, not "udp"/);
    expect(failure(() => read('root_cas: trusted\n'))).toMatch(/ngrok's own CA bundle/);
  });

  it('reads app_protocol (v2) and upstream.protocol (v3): http2 for an h2c service, http only', () => {
    expect(
      read('tunnels:\n  g: {proto: http, addr: 50051, app_protocol: http2}\n').tunnels[0],
    ).toMatchObject({ proto: 'http', appProtocol: 'http2' });
    expect(
      read('version: 3\nendpoints:\n  - name: g\n    upstream: {url: 50051, protocol: http2}\n')
        .tunnels[0],
    ).toMatchObject({ kind: 'endpoint', appProtocol: 'http2' });
    expect(
      read('tunnels:\n  w: {proto: http, addr: 80, app_protocol: http1}\n').tunnels[0],
    ).toMatchObject({ appProtocol: undefined });
    expect(
      failure(() => read('tunnels:\n  t: {proto: tcp, addr: 22, app_protocol: http2}\n')),
    ).toMatch(/\(tunnels\.t\.app_protocol\): applies to http endpoints only/);
    expect(
      failure(() =>
        read('version: 3\nendpoints:\n  - name: g\n    upstream: {url: 80, protocol: h3}\n'),
      ),
    ).toMatch(/\(endpoints\[0\]\.upstream\.protocol\): must be http1 or http2/);
  });
});
