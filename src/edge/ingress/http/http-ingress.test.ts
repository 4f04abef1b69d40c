import { Agent, createServer, request } from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { BurrowError, CODES } from '../../../core/errors.js';
import { withPolicy } from '../../../../test/support/policy.js';
import {
  fakeTunnel,
  httpRequest,
  listenLocal,
  metricValue,
  rawExchange,
  startHttpUpstream,
  startTcpUpstream,
} from '../../../../test/support/ingress.js';
import { useSharedIngress } from '../../../../test/support/shared-ingress.js';

const env = useSharedIngress();

describe('HTTP ingress routing and headers', () => {
  it('forwards by Host, sets X-Forwarded-*, and drops hop-by-hop headers both ways', async () => {
    const tunnel = env.httpTunnel('app.burrow.test');
    const reply = await httpRequest(env.ingress.httpPort, {
      host: `App.Burrow.Test:${env.ingress.httpPort}`,
      path: '/echo?x=1',
      headers: {
        'X-Forwarded-For': '198.51.100.7',
        'X-Forwarded-Proto': 'spoofed',
        'X-Custom': 'kept',
        Connection: 'keep-alive, X-Hop',
        'X-Hop': 'dropped',
      },
    });
    expect(reply.status).toBe(200);
    const seen = JSON.parse(reply.body);
    expect(seen.url).toBe('/echo?x=1');
    expect(seen.headers['x-forwarded-for']).toBe('198.51.100.7, 127.0.0.1');
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-host']).toBe(`App.Burrow.Test:${env.ingress.httpPort}`);
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers['x-hop']).toBeUndefined();
    expect(reply.headers['x-upstream']).toBe('yes');
    expect(reply.headers['x-secret']).toBeUndefined();
    expect(tunnel.connects[0]).toMatchObject({
      proto: 'http',
      edgeType: '',
      passthroughTls: false,
    });
    expect(tunnel.connects[0]!.clientAddr).toMatch(/^127\.0\.0\.1:\d+$/);
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('answers 404 naming the host when no tunnel serves it: HTML for browsers, text otherwise', async () => {
    const text = await httpRequest(env.ingress.httpPort, { host: 'nobody.burrow.test' });
    expect(text.status).toBe(404);
    expect(text.headers['content-type']).toMatch(/^text\/plain/);
    expect(text.headers['burrow-error-code']).toBe('ERR_NGROK_3200');
    expect(text.body).toContain('No tunnel is online for nobody.burrow.test');

    const html = await httpRequest(env.ingress.httpPort, {
      host: '<b>x</b>.burrow.test',
      headers: { Accept: 'text/html,application/xhtml+xml' },
    });
    expect(html.status).toBe(404);
    expect(html.headers['content-type']).toMatch(/^text\/html/);
    expect(html.body).toContain('&lt;b&gt;x&lt;/b&gt;.burrow.test');
    expect(html.body).not.toContain('<b>x</b>');
  });

  it('writes its own pages on the lean relay and keeps the connection: a 404, then a served request', async () => {
    const tunnel = env.httpTunnel('kept.burrow.test');
    const text = await rawExchange(
      env.ingress.httpPort,
      'GET / HTTP/1.1\r\nHost: nobody.burrow.test\r\n\r\n' +
        'HEAD / HTTP/1.1\r\nHost: nobody.burrow.test\r\n\r\n' +
        'GET / HTTP/1.1\r\nHost: kept.burrow.test\r\nConnection: close\r\n\r\n',
    );
    const parts = text.split(/(?=HTTP\/1\.1 \d{3} )/);
    expect(parts.map((p) => p.slice(9, 12))).toEqual(['404', '404', '200']);
    // Written by the relay, not Node's server (which adds keep-alive headers).
    expect(parts[0]).not.toMatch(/^keep-alive:/im);
    expect(parts[0]).toMatch(/^burrow-error-code: ERR_NGROK_3200\r$/im);
    expect(parts[0]).toContain('No tunnel is online for nobody.burrow.test');
    expect(parts[1]).toMatch(/\r\n\r\n$/);
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('answers 502 in well under a second when the agent refuses the connection', async () => {
    const tunnel = fakeTunnel({
      proto: 'http',
      hostname: 'gone.burrow.test',
      connect: () => Promise.reject(new Error('session closed')),
    });
    env.ingress.registry.addTunnel(tunnel);
    const started = performance.now();
    const reply = await httpRequest(env.ingress.httpPort, { host: 'gone.burrow.test' });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(reply.status).toBe(502);
    expect(reply.headers['burrow-error-code']).toBe('ERR_NGROK_3004');
    expect(reply.body).toContain(
      'gone.burrow.test is online, but the connection through it failed',
    );
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it.each([
    // An error with the page's own code: its sentence says more than the code again.
    [CODES.tunnelUnreachable, 'the agent is at its limit', 'failed (the agent is at its limit)'],
    // Another code is one to look up: the page names it.
    [CODES.tunnelConnectTimeout, 'no stream in time', 'failed (ERR_BURROW_TUNNEL_CONNECT_TIMEOUT)'],
  ])('names what failed (%s): a code to look up, or the sentence', async (code, message, shown) => {
    const tunnel = fakeTunnel({
      proto: 'http',
      hostname: 'busy.burrow.test',
      connect: () => Promise.reject(new BurrowError(code, 502, message)),
    });
    env.ingress.registry.addTunnel(tunnel);
    const reply = await httpRequest(env.ingress.httpPort, { host: 'busy.burrow.test' });
    expect(reply.status).toBe(502);
    expect(reply.headers['burrow-error-code']).toBe('ERR_NGROK_3004');
    expect(reply.body).toContain(shown);
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('answers 502 quickly when the tunnel stream is reset before a response', async () => {
    const resetter = await startTcpUpstream((socket) =>
      socket.once('data', () => socket.resetAndDestroy()),
    );
    const tunnel = fakeTunnel({
      proto: 'http',
      hostname: 'reset.burrow.test',
      upstreamPort: resetter.port,
    });
    env.ingress.registry.addTunnel(tunnel);
    const started = performance.now();
    const reply = await httpRequest(env.ingress.httpPort, { host: 'reset.burrow.test' });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(reply.status).toBe(502);
    expect(reply.body).toContain('ECONNRESET');
    env.ingress.registry.removeTunnel(tunnel.id);
    await resetter.close();
  });

  it('answers 502 when the agent sends something that is not a valid HTTP response', async () => {
    for (const answer of ['garbage\r\n\r\n', 'HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n']) {
      const liar = await startTcpUpstream((socket) =>
        socket.once('data', () => socket.end(answer)),
      );
      const tunnel = fakeTunnel({
        proto: 'http',
        hostname: 'liar.burrow.test',
        upstreamPort: liar.port,
      });
      env.ingress.registry.addTunnel(tunnel);
      const reply = await httpRequest(env.ingress.httpPort, { host: 'liar.burrow.test' });
      expect(reply.status).toBe(502);
      expect(reply.headers['burrow-error-code']).toBe('ERR_NGROK_3004');
      env.ingress.registry.removeTunnel(tunnel.id);
      await liar.close();
    }
  });

  it('cuts the public response when the agent resets in the middle of the body', async () => {
    const tunnel = env.httpTunnel('cut.burrow.test');
    const outcome = await new Promise<string>((resolve) => {
      const req = request(
        {
          port: env.ingress.httpPort,
          host: '127.0.0.1',
          path: '/cut',
          headers: { Host: 'cut.burrow.test' },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve('complete'));
          res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      req.end();
    });
    expect(outcome).toBe('ECONNRESET');
    env.ingress.registry.removeTunnel(tunnel.id);
  });
});

describe('HTTP ingress connections', () => {
  it('passes HEAD and 304 answers without a body and keeps the connection usable', async () => {
    const tunnel = env.httpTunnel('head.burrow.test');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const head = await httpRequest(env.ingress.httpPort, {
      host: 'head.burrow.test',
      method: 'HEAD',
      path: '/echo',
      agent,
    });
    expect(head.status).toBe(200);
    expect(Number(head.headers['content-length'])).toBeGreaterThan(0);
    expect(head.body).toBe('');
    const notModified = await httpRequest(env.ingress.httpPort, {
      host: 'head.burrow.test',
      path: '/not-modified',
      agent,
    });
    expect([notModified.status, notModified.body]).toEqual([304, '']);
    const after = await httpRequest(env.ingress.httpPort, {
      host: 'head.burrow.test',
      path: '/',
      agent,
    });
    expect(after.body).toBe('ok');
    expect(tunnel.connects).toHaveLength(1);
    agent.destroy();
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('reuses one tunnel stream for keep-alive requests', async () => {
    const tunnel = env.httpTunnel('keep.burrow.test');
    const acceptedBefore = env.upstream.accepted;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 5; i++) {
      const reply = await httpRequest(env.ingress.httpPort, { host: 'keep.burrow.test', agent });
      expect(reply.body).toBe('ok');
    }
    agent.destroy();
    expect(tunnel.connects).toHaveLength(1);
    expect(env.upstream.accepted - acceptedBefore).toBe(1);
    env.ingress.registry.removeTunnel(tunnel.id);
  });

  it('lets a request in flight finish when its tunnel goes offline, then closes its stream', async () => {
    const tunnel = env.httpTunnel('leaving.burrow.test');
    const pending = httpRequest(env.ingress.httpPort, {
      host: 'leaving.burrow.test',
      path: '/slow?ms=300&tag=finished',
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    env.ingress.registry.removeTunnel(tunnel.id);
    expect(await pending).toMatchObject({ status: 200, body: 'finished' });
    // Every other test's tunnel is offline too, so no stream to the service may stay open.
    for (let i = 0; i < 50 && env.upstream.open > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(env.upstream.open).toBe(0);
  });

  it('retries a body-less request once on a fresh stream when a kept stream was closed', async () => {
    const seenOnSocket = new WeakMap<object, number>();
    const oneShot = await startHttpUpstream((req, res) => {
      const count = (seenOnSocket.get(req.socket) ?? 0) + 1;
      seenOnSocket.set(req.socket, count);
      // Like a service whose idle timeout fires just as the stream is reused.
      if (count > 1) req.socket.destroy();
      else res.end('fresh');
    });
    const tunnel = fakeTunnel({
      proto: 'http',
      hostname: 'stale.burrow.test',
      upstreamPort: oneShot.port,
    });
    env.ingress.registry.addTunnel(tunnel);
    const first = await httpRequest(env.ingress.httpPort, { host: 'stale.burrow.test' });
    const second = await httpRequest(env.ingress.httpPort, { host: 'stale.burrow.test' });
    expect([first.status, first.body, second.status, second.body]).toEqual([
      200,
      'fresh',
      200,
      'fresh',
    ]);
    expect(tunnel.connects).toHaveLength(2);
    env.ingress.registry.removeTunnel(tunnel.id);
    await oneShot.close();
  });
});

describe('HTTP ingress metrics', () => {
  it('counts requests, connections and bytes by endpoint, and drops them when the endpoint is gone', async () => {
    const tunnel = env.httpTunnel('metered.burrow.test');
    const endpoint = tunnel.url!;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 3; i++)
      await httpRequest(env.ingress.httpPort, { host: 'metered.burrow.test', agent });
    await httpRequest(env.ingress.httpPort, {
      host: 'metered.burrow.test',
      path: '/hash',
      method: 'POST',
      body: 'x'.repeat(10_000),
      agent,
    });
    const before404 = metricValue(env.ingress.metrics, 'burrow_http_requests_total', {
      endpoint: 'none',
      code: '404',
    });
    await httpRequest(env.ingress.httpPort, { host: 'unknown.burrow.test' });

    expect(
      metricValue(env.ingress.metrics, 'burrow_http_requests_total', { endpoint, code: '200' }),
    ).toBe(4);
    expect(
      metricValue(env.ingress.metrics, 'burrow_http_requests_total', {
        endpoint: 'none',
        code: '404',
      }),
    ).toBe(before404 + 1);
    expect(metricValue(env.ingress.metrics, 'burrow_connections_total', { endpoint })).toBe(1);
    expect(metricValue(env.ingress.metrics, 'burrow_connections_active', { endpoint })).toBe(1);
    expect(
      metricValue(env.ingress.metrics, 'burrow_bytes_received_total', { endpoint }),
    ).toBeGreaterThan(10_000);
    expect(
      metricValue(env.ingress.metrics, 'burrow_bytes_sent_total', { endpoint }),
    ).toBeGreaterThan(100);

    agent.destroy();
    env.ingress.registry.removeTunnel(tunnel.id);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(env.ingress.metrics.render()).not.toContain('metered.burrow.test');
  });
});

describe('routing once per request', () => {
  it('looks a request up and picks its pool member once, with an HTTP policy phase', async () => {
    // Two pooled members with an HTTP policy phase: the policy runs on the member picked. A
    // second lookup would pick again and send every request to the same member.
    const services = await Promise.all(
      ['A', 'B'].map((name) => listenLocal(createServer((_req, res) => res.end(name)))),
    );
    const members = services.map((service) => {
      const tunnel = withPolicy(
        fakeTunnel({ proto: 'http', hostname: 'once.burrow.test', upstreamPort: service.port }),
        JSON.stringify({
          on_http_request: [
            { actions: [{ type: 'add-headers', config: { headers: { x: 'y' } } }] },
          ],
        }),
      );
      tunnel.pooling = true;
      env.ingress.registry.addTunnel(tunnel);
      return tunnel;
    });
    const registry = env.ingress.registry;
    const byHost = vi.spyOn(registry, 'byHost');
    const served: string[] = [];
    for (let i = 0; i < 6; i++) {
      const reply = await httpRequest(env.ingress.httpPort, {
        host: 'once.burrow.test',
        agent: false,
      });
      expect(reply.status).toBe(200);
      served.push(reply.body);
    }
    expect(byHost).toHaveBeenCalledTimes(6);
    byHost.mockRestore();
    expect(served.filter((s) => s === 'A')).toHaveLength(3);
    expect(served.filter((s) => s === 'B')).toHaveLength(3);
    for (const m of members) registry.removeTunnel(m.id);
    await Promise.all(services.map((s) => s.close()));
  });
});
