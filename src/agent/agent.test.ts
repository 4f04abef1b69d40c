import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../sdk/index.js';
import {
  startHttpUpstream,
  startTcpUpstream,
  type LocalServer,
} from '../../test/support/ingress.js';
import { readAll, until } from '../../test/support/mux.js';
import { startSdkTestEdge, type SdkTestEdge } from '../../test/support/sdk-edge.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import { startAgent, type AgentOptions, type RunningAgent } from './agent.js';
import { AgentStartupError } from './errors.js';
import { NODE_STATE_FS, StateFile } from './state-file.js';
import { parseTunnelRequest } from './tunnel-input.js';
import { TunnelManager } from './tunnels.js';

/**
 * The device agent against an in-process edge: the tunnels' whole life (create, serve, list,
 * delete), the state file, restarts, an unreachable server, and the exposed API. The same story
 * with real processes and the default policy is test/device-agent.test.ts.
 */

const silent = pino({ level: 'silent' });
const SITE = 'sitea.burrow.test';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // Replies of several shapes; tests narrow them by assertion.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

function httpCall(
  port: number,
  method: string,
  path: string,
  o: { host?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.host) headers.host = o.host;
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => {
        let body: unknown;
        try {
          body = text === '' ? undefined : JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode!, headers: res.headers, text, body });
      });
    });
    req.on('error', reject);
    req.end(o.body === undefined ? undefined : JSON.stringify(o.body));
  });
}

describe.each(DATABASE_KINDS)('burrow agent with an in-process edge (%s)', (kind) => {
  let edge: SdkTestEdge;
  let web: LocalServer;
  let echo: LocalServer;
  let dir: string | undefined;
  let token: string;
  let tcpAddr: string;
  const agents: RunningAgent[] = [];

  beforeAll(async () => {
    edge = await startSdkTestEdge(kind);
    await edge.repos.reservedDomains.create({ domain: `*.${SITE}` });
    // Lowest free ports are what every test edge reserves first; pick one further up the range.
    const skip = 1 + Math.floor(Math.random() * 40);
    for (let i = 0; i < skip; i++) tcpAddr = (await edge.repos.reservedAddrs.create({})).addr;
    const bot = await edge.repos.botUsers.create({ name: 'sitea-agent' });
    token = await edge.token({ acl: [`bind:*.${SITE}`, `bind:${tcpAddr}`], owner_id: bot.id });
    web = await startHttpUpstream((req, res) => res.end(`device says ${req.url}`));
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
  });
  afterAll(async () => {
    await web?.close();
    await echo?.close();
    await edge?.close();
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** This test's folder for the state and policy files. */
  const folder = (): string => (dir ??= mkdtempSync(join(tmpdir(), 'burrow-agent-')));
  const options = (o: Partial<AgentOptions> = {}): AgentOptions => {
    const base = folder();
    return {
      serverAddr: edge.serverAddr,
      authtoken: token,
      ca: edge.caFile,
      listen: '127.0.0.1:0',
      statePath: join(base, 'tunnels.json'),
      defaultPolicyPath: join(base, 'test.json'),
      defaultPolicyExplicit: false,
      expose: undefined,
      apiToken: undefined,
      connectOptions: { heartbeatInterval: 1000, heartbeatTolerance: 2000 },
      retry: { initialDelay: 50, maxDelay: 500 },
      ...o,
    };
  };
  const start = async (o: Partial<AgentOptions> = {}, waitOnline = true): Promise<RunningAgent> => {
    const agent = await startAgent(options(o), silent);
    agents.push(agent);
    if (waitOnline) await once(agent.tunnels, 'online');
    return agent;
  };
  const api = (agent: RunningAgent, method: string, path: string, body?: unknown) =>
    httpCall(Number(agent.address.split(':').pop()), method, path, { body });
  const publicGet = (hostname: string, path = '/', headers?: Record<string, string>) =>
    httpCall(edge.httpPort, 'GET', path, { host: hostname, headers });
  const stored = (): unknown[] =>
    (JSON.parse(readFileSync(join(folder(), 'tunnels.json'), 'utf8')) as { tunnels: unknown[] })
      .tunnels;
  const online = (url: string): boolean => edge.registry.listTunnels().some((t) => t.url === url);
  const echoThrough = async (port: number, text: string): Promise<string> => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    socket.end(text);
    return String(await readAll(socket));
  };

  it('creates, serves, lists and deletes tunnels, each change saved before the reply', async () => {
    const agent = await start();
    expect(await api(agent, 'GET', '/tunnels')).toMatchObject({ status: 200, body: [] });
    expect(stored()).toEqual([]);

    const device1 = `device1.${SITE}`;
    const created = await api(agent, 'POST', '/tunnels', {
      protocol: 'http',
      forwards_to: `:${web.port}`,
      domain: device1,
    });
    const tunnel = {
      url: `https://${device1}:8443`,
      url_part: device1,
      protocol: 'http',
      forwards_to: `:${web.port}`,
      domain: device1,
    };
    expect(created).toMatchObject({ status: 200, body: { ...tunnel, policy: null } });
    expect(stored()).toEqual([{ ...tunnel, policy: null, created_at: expect.any(String) }]);
    expect(await publicGet(device1, '/hello')).toMatchObject({
      status: 200,
      text: 'device says /hello',
    });
    expect((await api(agent, 'GET', '/tunnels')).body).toEqual([{ ...tunnel, policy: null }]);

    const duplicate = await api(agent, 'POST', '/tunnels', { forwards_to: ':1', domain: device1 });
    expect(duplicate).toMatchObject({ status: 409, body: { field: 'domain' } });
    expect(duplicate.body.error).toContain(`DELETE /tunnels/${device1}`);

    const deleted = await api(agent, 'DELETE', `/tunnels/${device1}`);
    expect(deleted).toMatchObject({ status: 204, text: '' });
    expect(stored()).toEqual([]);
    expect(online(tunnel.url)).toBe(false);
    expect((await publicGet(device1, '/hello')).status).toBe(404);
    expect((await api(agent, 'DELETE', `/tunnels/${device1}`)).status).toBe(404);
    expect((await api(agent, 'GET', '/tunnels')).body).toEqual([]);
  });

  it('returns the server refusal and creates nothing when the bind or the policy is refused', async () => {
    const agent = await start();
    const outside = await api(agent, 'POST', '/tunnels', {
      forwards_to: `:${web.port}`,
      domain: 'device1.siteb.burrow.test',
    });
    expect(outside).toMatchObject({
      status: 403,
      body: { code: 'ERR_NGROK_316', field: 'domain' },
    });
    expect(outside.body.error).toMatch(
      /^the server refused the tunnel on device1\.siteb\.burrow\.test: /,
    );
    const badPolicy = await api(agent, 'POST', '/tunnels', {
      forwards_to: `:${web.port}`,
      domain: `device9.${SITE}`,
      policy: { outbound: [{ actions: [{ type: 'add-headers', config: { headers: 'nope' } }] }] },
    });
    expect(badPolicy).toMatchObject({ status: 400, body: { field: 'policy' } });
    expect(badPolicy.body.code).toMatch(/^ERR_NGROK_22\d\d$/);
    expect(stored()).toEqual([]);
    expect(edge.registry.listTunnels().filter((t) => t.url?.includes(SITE))).toEqual([]);
  });

  it('recreates every stored tunnel on the same URL at start (tcp as well)', async () => {
    const first = await start();
    const http = await api(first, 'POST', '/tunnels', {
      forwards_to: `127.0.0.1:${web.port}`,
      domain: `device2.${SITE}`,
    });
    const tcp = await api(first, 'POST', '/tunnels', {
      protocol: 'tcp',
      forwards_to: `:${echo.port}`,
      domain: tcpAddr,
    });
    expect(tcp).toMatchObject({
      status: 200,
      body: { url: `tcp://${tcpAddr}`, url_part: tcpAddr, protocol: 'tcp', policy: null },
    });
    const before = (await api(first, 'GET', '/tunnels')).body as Array<{ url: string }>;
    await first.close();
    await until(() => !online(http.body.url as string) && !online(tcp.body.url as string));

    const second = await start();
    expect((await api(second, 'GET', '/tunnels')).body).toEqual(before);
    expect(online(http.body.url as string) && online(tcp.body.url as string)).toBe(true);
    expect((await publicGet(`device2.${SITE}`, '/again')).text).toBe('device says /again');
    const port = Number(tcpAddr.split(':')[1]);
    await edge.ingress.tcp.listening(port);
    expect(await echoThrough(port, 'through the agent')).toBe('through the agent');
    expect((await api(second, 'DELETE', `/tunnels/${encodeURIComponent(tcpAddr)}`)).status).toBe(
      204,
    );
    expect(online(tcp.body.url as string)).toBe(false);
  });

  it('keeps serving while the server is down and brings the tunnels back', async () => {
    const agent = await start();
    const device3 = `device3.${SITE}`;
    await api(agent, 'POST', '/tunnels', { forwards_to: `:${web.port}`, domain: device3 });
    const restarted = edge.restart({ downMs: 1500 });
    await until(() => agent.tunnels.currentSession?.connected === false);
    expect((await api(agent, 'GET', '/tunnels')).body).toHaveLength(1);
    const refused = await api(agent, 'POST', '/tunnels', {
      forwards_to: ':1',
      domain: `x.${SITE}`,
    });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatch(/^not connected to the server at /);
    await restarted;
    await until(() => online(`https://${device3}:8443`), 10_000);
    expect((await publicGet(device3, '/back')).text).toBe('device says /back');
  });

  it('starts while the server is unreachable and restores the stored tunnels once it answers', async () => {
    const device4 = `device4.${SITE}`;
    const first = await start();
    await api(first, 'POST', '/tunnels', { forwards_to: `:${web.port}`, domain: device4 });
    await first.close();

    // A port where nothing listens yet; later a relay to the edge opens there.
    const probe = net.createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const agent = await start({ serverAddr: `127.0.0.1:${port}` }, false);
    await new Promise((r) => setTimeout(r, 300));
    expect((await api(agent, 'GET', '/tunnels')).body).toMatchObject([{ domain: device4 }]);
    expect(
      (await api(agent, 'POST', '/tunnels', { forwards_to: ':1', domain: `y.${SITE}` })).status,
    ).toBe(503);

    const [host, edgePort] = [
      edge.serverAddr.split(':')[0]!,
      Number(edge.serverAddr.split(':')[1]),
    ];
    const relay = net.createServer((c) => {
      const up = net.connect(edgePort, host);
      c.pipe(up).pipe(c);
      c.on('error', () => up.destroy());
      up.on('error', () => c.destroy());
    });
    relay.listen(port, '127.0.0.1');
    await once(relay, 'listening');
    try {
      await once(agent.tunnels, 'online');
      expect((await publicGet(device4, '/late')).text).toBe('device says /late');
    } finally {
      await agent.close();
      relay.close();
    }
  });

  it('closes the tunnel again when the state file cannot be written', async () => {
    const failing = new StateFile(join(folder(), 'tunnels.json'), {
      ...NODE_STATE_FS,
      open: () => Promise.reject(new Error('disk full')),
    });
    const tunnels = new TunnelManager({
      state: failing,
      defaultPolicy: undefined,
      logger: silent,
      serverAddr: edge.serverAddr,
      connect: () => connect({ serverAddr: edge.serverAddr, authtoken: token, ca: edge.caFile }),
    });
    tunnels.start([]);
    await once(tunnels, 'online');
    try {
      const request = parseTunnelRequest({
        forwards_to: `:${web.port}`,
        domain: `device5.${SITE}`,
      });
      await expect(tunnels.create(request)).rejects.toMatchObject({
        status: 500,
        message: expect.stringMatching(
          /disk full; the tunnel was closed again and not created$/,
        ) as string,
      });
      await until(() => !online(`https://device5.${SITE}:8443`));
      expect(tunnels.list()).toEqual([]);
      expect(existsSync(join(folder(), 'tunnels.json'))).toBe(false);
    } finally {
      await tunnels.close();
    }
  });

  it('refuses to start on a corrupt state file, naming it and leaving it untouched', async () => {
    const path = join(folder(), 'tunnels.json');
    writeFileSync(path, '{"version": 1, "tunnels": [ {"url": ');
    const error = await startAgent(options(), silent).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error).toBeInstanceOf(AgentStartupError);
    expect(error!.message).toContain(`the state file ${path} is not valid JSON`);
    expect(readFileSync(path, 'utf8')).toBe('{"version": 1, "tunnels": [ {"url": ');
  });

  it('serves the API through the exposed domain only with the bearer token', async () => {
    await expect(startAgent(options({ expose: `agent.${SITE}` }), silent)).rejects.toThrow(
      /--expose serves the agent API publicly, so it needs --api-token/,
    );
    const agent = await start({ expose: `agent.${SITE}`, apiToken: 'k7-device-secret' });
    expect(agent.tunnels.exposedUrl).toBe(`https://agent.${SITE}:8443`);
    const anonymous = await publicGet(`agent.${SITE}`, '/tunnels');
    expect(anonymous).toMatchObject({
      status: 401,
      body: { error: expect.stringMatching(/^authentication required/) as string },
    });
    const wrong = await publicGet(`agent.${SITE}`, '/tunnels', { authorization: 'Bearer nope' });
    expect(wrong.status).toBe(401);
    const allowed = await publicGet(`agent.${SITE}`, '/tunnels', {
      authorization: 'Bearer k7-device-secret',
    });
    expect(allowed).toMatchObject({ status: 200, body: [] });
    expect((await api(agent, 'GET', '/tunnels')).status).toBe(401);
    const clash = await httpCall(Number(agent.address.split(':').pop()), 'POST', '/tunnels', {
      body: { forwards_to: ':1', domain: `agent.${SITE}` },
      headers: { authorization: 'Bearer k7-device-secret' },
    });
    expect(clash).toMatchObject({ status: 409, body: { field: 'domain' } });
  });

  it('ends with code 1 when the server refuses the authtoken', async () => {
    const agent = await start({ authtoken: 'not-a-token' }, false);
    const ended = await agent.ended;
    expect(ended.code).toBe(1);
    expect(ended.reason).toMatch(/refused the agent: .*ERR_NGROK_105/);
  });
});
