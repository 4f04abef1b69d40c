import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyEventLog } from '../../../policy/index.js';
import {
  fakeTunnel,
  httpRequest,
  startHttpUpstream,
  startTestIngress,
  type FakeTunnel,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { withPolicy } from '../../../../test/support/policy.js';

/**
 * Opts.HostHeaderRewrite: the agent gets `Host: <ForwardsTo's host:port>` on both HTTP paths
 * (the lean relay, and the Node path that policies and upgrades take), `X-Forwarded-Host` keeps
 * the client's, and policies still see the client's Host.
 */
describe('HostHeaderRewrite', () => {
  let t: TestIngress;
  let upstream: LocalServer;
  const events = new PolicyEventLog();
  let n = 0;

  /** What the upstream saw of a request (or an upgrade). */
  const seen = (req: IncomingMessage) =>
    JSON.stringify({
      host: req.headers.host,
      forwardedHost: req.headers['x-forwarded-host'],
      policyHost: req.headers['x-policy-host'],
    });

  beforeAll(async () => {
    t = await startTestIngress();
    upstream = await startHttpUpstream(
      (req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(seen(req));
      },
      (server) =>
        server.on('upgrade', (req: IncomingMessage, socket) => {
          const body = seen(req);
          socket.end(
            `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n` +
              `X-Seen: ${body}\r\n\r\n`,
          );
        }),
    );
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  function online(options: { forwardsTo?: string; rewrite?: boolean; policy?: string }): {
    tunnel: FakeTunnel;
    host: string;
  } {
    const host = `hh${++n}.burrow.test`;
    let tunnel = fakeTunnel({
      proto: 'http',
      hostname: host,
      upstreamPort: upstream.port,
      ...(options.forwardsTo !== undefined ? { forwardsTo: options.forwardsTo } : {}),
      ...(options.rewrite === false ? {} : { hostHeaderRewrite: true as const }),
    });
    if (options.policy) tunnel = withPolicy(tunnel, options.policy, events);
    t.registry.addTunnel(tunnel);
    return { tunnel, host };
  }

  const get = async (host: string) => {
    const reply = await httpRequest(t.httpPort, { host, path: '/' });
    expect(reply.status).toBe(200);
    return JSON.parse(reply.body) as Record<string, string | undefined>;
  };

  it('the lean relay sends the upstream its own host and port; X-Forwarded-Host is the public one', async () => {
    const { host } = online({});
    expect(await get(host)).toEqual({ host: `localhost:${upstream.port}`, forwardedHost: host });
  });

  it('a URL in ForwardsTo: its host, the default port of its scheme dropped', async () => {
    const { host } = online({ forwardsTo: 'http://App.Local:80/' });
    expect(await get(host)).toEqual({ host: 'app.local', forwardedHost: host });
    const tls = online({ forwardsTo: 'https://api.local:8443' });
    expect((await get(tls.host)).host).toBe('api.local:8443');
  });

  it('without the option, or with a ForwardsTo that names no host, the Host is unchanged', async () => {
    const plain = online({ rewrite: false });
    expect(await get(plain.host)).toEqual({ host: plain.host, forwardedHost: plain.host });
    for (const forwardsTo of ['', 'http.Server', 'app://laptop/server.js?pid=7']) {
      const { host } = online({ forwardsTo });
      expect(await get(host)).toEqual({ host, forwardedHost: host });
    }
  });

  it('the Node path (a policy endpoint): rewritten too, while the policy saw the public Host', async () => {
    const policy = JSON.stringify({
      on_http_request: [
        {
          actions: [
            { type: 'add-headers', config: { headers: { 'x-policy-host': '${req.host}' } } },
          ],
        },
      ],
    });
    const { host } = online({ policy });
    expect(await get(host)).toEqual({
      host: `localhost:${upstream.port}`,
      forwardedHost: host,
      policyHost: host,
    });
    // A policy's own change to Host is ignored either way: the ingress owns the header.
    const owned = JSON.stringify({
      on_http_request: [
        { actions: [{ type: 'add-headers', config: { headers: { host: 'evil.example' } } }] },
      ],
    });
    const second = online({ policy: owned });
    expect((await get(second.host)).host).toBe(`localhost:${upstream.port}`);
  });

  it('upgrades (the Node path, relayed raw) are rewritten too', async () => {
    const { host } = online({});
    const socket = connect(t.httpPort, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n`,
    );
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    await once(socket, 'end');
    socket.destroy();
    expect(text).toMatch(/^HTTP\/1\.1 101 /);
    const line = /^X-Seen: (.*)$/m.exec(text)![1]!.trim();
    expect(JSON.parse(line)).toEqual({ host: `localhost:${upstream.port}`, forwardedHost: host });
  });
});
