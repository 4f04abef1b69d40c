import { once } from 'node:events';
import { createServer, request, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentApiError } from './errors.js';
import { createAgentApi, isDirectHost, tokenMatches, type RequestSource } from './local-api.js';
import type { TunnelRequest } from './tunnel-input.js';
import type { CreatedTunnel, TunnelService, TunnelView } from './tunnel-endpoints.js';

const VIEW: TunnelView = {
  url: 'https://device1.sitea.burrow.test:8443',
  url_part: 'device1.sitea.burrow.test',
  protocol: 'http',
  forwards_to: ':8001',
  domain: 'device1.sitea.burrow.test',
  policy: null,
};

/** Tunnels in memory, recording what the API asked for. */
class FakeTunnels implements TunnelService {
  created: TunnelRequest[] = [];
  removed: string[] = [];
  list(): TunnelView[] {
    return [VIEW];
  }
  async create(request: TunnelRequest): Promise<CreatedTunnel> {
    this.created.push(request);
    if (request.protocol === 'labeled') return { ...VIEW, policy: null };
    if (request.domain === 'taken.sitea.burrow.test') {
      throw new AgentApiError(409, 'exists already', { field: 'domain' });
    }
    return { ...VIEW, domain: request.domain, policy: request.policy };
  }
  async remove(urlPart: string): Promise<void> {
    if (urlPart !== VIEW.url_part)
      throw new AgentApiError(404, `no tunnel has the url_part '${urlPart}'`);
    this.removed.push(urlPart);
  }
}

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // Bodies of several shapes; tests narrow them by assertion.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

describe('the agent API', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  async function serve(
    apiToken: string | undefined,
    source: RequestSource = 'local',
  ): Promise<{
    tunnels: FakeTunnels;
    send: (
      method: string,
      path: string,
      o?: { body?: string; headers?: Record<string, string> },
    ) => Promise<Reply>;
  }> {
    const tunnels = new FakeTunnels();
    const handler: RequestListener = createAgentApi({
      tunnels,
      apiToken,
      logger: pino({ level: 'silent' }),
    })(source);
    const server = createServer(handler).listen(0, '127.0.0.1');
    servers.push(server);
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    const send = (
      method: string,
      path: string,
      o: { body?: string; headers?: Record<string, string> } = {},
    ) =>
      new Promise<Reply>((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, method, path, headers: o.headers },
          (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (d: string) => (text += d));
            res.on('end', () =>
              resolve({
                status: res.statusCode!,
                headers: res.headers,
                body: text === '' ? undefined : JSON.parse(text),
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(o.body);
      });
    return { tunnels, send };
  }

  const json = { 'content-type': 'application/json' };
  const createBody = JSON.stringify({
    protocol: 'http',
    forwards_to: ':8001',
    domain: 'device2.sitea.burrow.test',
  });

  it('lists, creates and deletes', async () => {
    const { tunnels, send } = await serve(undefined);
    expect(await send('GET', '/tunnels')).toMatchObject({
      status: 200,
      body: [VIEW],
      headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
    });
    const created = await send('POST', '/tunnels', { body: createBody, headers: json });
    expect(created).toMatchObject({
      status: 200,
      body: { domain: 'device2.sitea.burrow.test', policy: null },
    });
    expect(tunnels.created).toEqual([
      {
        protocol: 'http',
        forwards_to: ':8001',
        target: 'localhost:8001',
        domain: 'device2.sitea.burrow.test',
        policy: null,
      },
    ]);
    const deleted = await send('DELETE', '/tunnels/device1.sitea.burrow.test');
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect(tunnels.removed).toEqual(['device1.sitea.burrow.test']);
    expect(await send('DELETE', '/tunnels/nope.sitea.burrow.test')).toMatchObject({
      status: 404,
      body: { error: "no tunnel has the url_part 'nope.sitea.burrow.test'" },
    });
    await send('DELETE', `/tunnels/${encodeURIComponent('device1.sitea.burrow.test')}/`);
    expect(tunnels.removed).toHaveLength(2);
  });

  it('answers bad requests with a JSON error naming the problem', async () => {
    const { tunnels, send } = await serve(undefined);
    expect(await send('POST', '/tunnels', { body: createBody })).toMatchObject({
      status: 415,
      body: {
        error: expect.stringContaining('Content-Type: application/json') as string,
        code: 'ERR_NGROK_216',
      },
    });
    expect(
      await send('POST', '/tunnels', { body: '{"forwards_to":', headers: json }),
    ).toMatchObject({
      status: 400,
      body: {
        error: expect.stringMatching(/^the body is not valid JSON/) as string,
        code: 'ERR_NGROK_213',
      },
    });
    expect(await send('POST', '/tunnels', { body: '', headers: json })).toMatchObject({
      status: 400,
    });
    expect(
      await send('POST', '/tunnels', {
        body: JSON.stringify({ forwards_to: ':0', domain: 'a.b.c' }),
        headers: json,
      }),
    ).toMatchObject({ status: 400, body: { field: 'forwards_to', code: 'ERR_NGROK_215' } });
    expect(
      await send('POST', '/tunnels', {
        body: JSON.stringify({ forwards_to: ':1', domain: 'taken.sitea.burrow.test' }),
        headers: json,
      }),
    ).toMatchObject({ status: 409, body: { error: 'exists already', field: 'domain' } });
    expect(
      await send('POST', '/tunnels', { body: 'x'.repeat(1024 * 1024 + 1), headers: json }),
    ).toMatchObject({ status: 413 });
    expect(await send('GET', '/nope')).toMatchObject({
      status: 404,
      body: {
        error: expect.stringContaining(
          'the API has GET /tunnels, POST /tunnels and DELETE /tunnels/{url_part}',
        ) as string,
      },
    });
    expect(await send('PUT', '/tunnels')).toMatchObject({
      status: 405,
      headers: { allow: 'GET, POST' },
    });
    expect(await send('GET', '/tunnels/device1.sitea.burrow.test')).toMatchObject({
      status: 405,
      headers: { allow: 'DELETE' },
    });
    expect(tunnels.created.map((t) => t.protocol !== 'labeled' && t.domain)).toEqual([
      'taken.sitea.burrow.test',
    ]);
  });

  it('without a token, refuses Host names other than IP addresses and localhost (DNS rebinding)', async () => {
    const { send } = await serve(undefined);
    expect((await send('GET', '/tunnels', { headers: { host: 'localhost:8000' } })).status).toBe(
      200,
    );
    expect((await send('GET', '/tunnels', { headers: { host: '[::1]:8000' } })).status).toBe(200);
    const rebound = await send('GET', '/tunnels', {
      headers: { host: 'attacker.example.com:8000' },
    });
    expect(rebound.status).toBe(403);
    expect(rebound.body.error).toMatch(
      /Host 'attacker\.example\.com:8000' is refused.*--api-token/,
    );
  });

  it('with a token, requires it on every request (401 with WWW-Authenticate otherwise)', async () => {
    const { tunnels, send } = await serve('s3cret-token');
    const none = await send('GET', '/tunnels');
    expect(none).toMatchObject({
      status: 401,
      headers: { 'www-authenticate': 'Bearer realm="burrow agent"' },
    });
    expect(none.body.error).toMatch(/^authentication required/);
    const wrong = await send('GET', '/tunnels', {
      headers: { authorization: 'Bearer s3cret-tokeN' },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatch(/^the bearer token is wrong/);
    expect(
      (await send('GET', '/tunnels', { headers: { authorization: 'Basic s3cret-token' } })).status,
    ).toBe(401);
    expect((await send('DELETE', '/tunnels/device1.sitea.burrow.test')).status).toBe(401);
    expect(
      (
        await send('POST', '/tunnels', {
          body: createBody,
          headers: { ...json, authorization: 'Bearer nope' },
        })
      ).status,
    ).toBe(401);
    expect(tunnels.created).toEqual([]);
    expect(tunnels.removed).toEqual([]);
    const good = await send('GET', '/tunnels', {
      headers: { authorization: 'bearer s3cret-token', host: 'agent.sitea.burrow.test' },
    });
    expect(good).toMatchObject({ status: 200, body: [VIEW] });
  });

  it('never serves the exposed side without a token', async () => {
    const { send } = await serve(undefined, 'exposed');
    expect((await send('GET', '/tunnels')).status).toBe(401);
    const exposed = await serve('t0ken', 'exposed');
    expect((await exposed.send('GET', '/tunnels')).status).toBe(401);
    expect(
      (await exposed.send('GET', '/tunnels', { headers: { authorization: 'Bearer t0ken' } }))
        .status,
    ).toBe(200);
  });
});

describe('tokenMatches and isDirectHost', () => {
  it('compares tokens exactly, whatever their lengths', () => {
    expect(tokenMatches('abc', 'abc')).toBe(true);
    expect(tokenMatches('abc', 'abd')).toBe(false);
    expect(tokenMatches('abc', 'abcd')).toBe(false);
    expect(tokenMatches('', 'abc')).toBe(false);
  });

  it('tells IP addresses and localhost names from other names', () => {
    for (const host of [
      '127.0.0.1:8000',
      '10.1.2.3',
      '[::1]:8000',
      'localhost',
      'LOCALHOST:1',
      'agent.localhost:8000',
    ]) {
      expect(isDirectHost(host), host).toBe(true);
    }
    for (const host of [
      undefined,
      '',
      'example.com',
      'localhost.example.com:8000',
      '127.0.0.1.nip.io',
      // Not a Host header at all: an unbracketed IPv6 address, an unclosed bracket, a bad port.
      '::1',
      '[::1',
      'localhost:http',
      '127.0.0.1:99999',
    ]) {
      expect(isDirectHost(host), String(host)).toBe(false);
    }
  });
});
