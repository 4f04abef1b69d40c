import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CapturedRequest } from '../src/agent/request-log.js';
import { BURROW_VERSION } from '../src/cli/version.js';
import { curl } from './support/curl.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { freePort, spawnBurrow, type RunningBurrow } from './support/server-process.js';

/**
 * The agent API of `burrow http` on --web-addr, checked against the shapes of ngrok's agent API
 * (docs/agent-api.md): a real `burrow server`, the compiled `burrow http`, real curl and jq.
 * Run `npm run build` first.
 */

const run = promisify(execFile);

describe('the agent API of burrow http (127.0.0.1:<web_addr>/api)', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let home: string;
  let token: string;
  let agent: RunningBurrow;
  let api: string;
  let publicUrl: string;
  /** What the local service received: method, path and body of each request. */
  const received: string[] = [];
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  async function startHttp(args: string[], env: NodeJS.ProcessEnv = {}): Promise<RunningBurrow> {
    return spawnBurrow(
      [
        'http',
        String(service.port),
        '--server',
        `127.0.0.1:${edge.ports.agent}`,
        '--authtoken',
        token,
        '--ca',
        edge.caFile,
        ...args,
      ],
      { XDG_CONFIG_HOME: join(home, 'none'), ...env },
    );
  }

  async function webInterface(agentRun: RunningBurrow): Promise<string> {
    await until(
      () => /^Forwarding /m.test(agentRun.stdout()) || agentRun.child.exitCode !== null,
      20_000,
    );
    const m = /^Web Interface (http:\/\/\S+)$/m.exec(agentRun.stdout());
    if (!m) throw new Error(`no Web Interface line: ${agentRun.stdout()} ${agentRun.stderr()}`);
    return m[1]!;
  }

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    token = await createAuthtoken(edge.api, { description: 'agent api' });
    home = mkdtempSync(join(tmpdir(), 'burrow-agent-web-'));
    service = await startHttpUpstream((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(`${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ seen: req.url }));
      });
    });
    const port = await freePort();
    agent = await startHttp(['--web-addr', `127.0.0.1:${port}`]);
    api = await webInterface(agent);
    expect(api).toBe(`http://127.0.0.1:${port}`);
  });
  afterAll(async () => {
    agent?.child.kill('SIGINT');
    await agent?.exit;
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    rmSync(home, { recursive: true, force: true });
  });

  it('curl | jq reads the public URL from /api/tunnels, and the URL serves the local service', async () => {
    const { stdout } = await run('bash', [
      '-c',
      `curl -s ${api}/api/tunnels | jq -r '.tunnels[0].public_url'`,
    ]);
    publicUrl = stdout.trim();
    expect(publicUrl).toMatch(/^https:\/\/[a-z0-9]+\.burrow\.test:\d+$/);
    const reply = await curlUrl(publicUrl, '/hook?from=jq', [
      '-H',
      'content-type: application/json',
      '--data',
      '{"event":"push"}',
    ]);
    expect(reply).toMatchObject({ status: 200, body: { seen: '/hook?from=jq' } });

    const list = await curl([`${api}/api/tunnels`]);
    expect(list.status).toBe(200);
    expect(list.headers['content-type']).toBe('application/json');
    expect(list.body).toMatchObject({
      uri: '/api/tunnels',
      tunnels: [
        {
          name: 'command_line',
          uri: '/api/tunnels/command_line',
          public_url: publicUrl,
          proto: 'https',
          config: { addr: `localhost:${service.port}`, inspect: true },
          metrics: {
            conns: { count: expect.any(Number) },
            http: { count: 1, p50: expect.any(Number) },
          },
        },
      ],
    });
    expect((await curl([`${api}/api/tunnels/command_line`])).body.public_url).toBe(publicUrl);
  });

  it('GET /api/requests/http lists the captured request, with headers, body and response', async () => {
    await until(() => received.length > 0, 5000);
    const list = await curl([`${api}/api/requests/http?limit=10&tunnel_name=command_line`]);
    expect(list.status).toBe(200);
    expect(list.body.uri).toBe('/api/requests/http');
    const [captured] = list.body.requests as CapturedRequest[];
    expect(captured).toMatchObject({
      tunnel_name: 'command_line',
      remote_addr: '127.0.0.1',
      request: {
        method: 'POST',
        uri: '/hook?from=jq',
        proto: 'HTTP/1.1',
        headers: { 'Content-Type': ['application/json'] },
      },
      response: {
        status: '200 OK',
        status_code: 200,
        headers: { 'Content-Type': ['application/json'] },
      },
    });
    expect(captured!.duration).toBeGreaterThan(0);
    expect(Buffer.from(captured!.request.raw, 'base64').toString()).toMatch(
      /\r\n\r\n\{"event":"push"\}$/,
    );
    expect(Buffer.from(captured!.response!.raw, 'base64').toString()).toMatch(
      /\{"seen":"\/hook\?from=jq"\}$/,
    );

    const one = await curl([`${api}/api/requests/http/${captured!.id}`]);
    expect(one.body).toEqual(captured);
    expect((await curl([`${api}/api/requests/http?tunnel_name=other`])).body.requests).toEqual([]);
    expect((await curl([`${api}/api/requests/http?limit=0`])).body.requests).toEqual([]);
    const missing = await curl([`${api}/api/requests/http/nope`]);
    expect(missing).toMatchObject({
      status: 404,
      body: { status_code: 404, msg: expect.stringContaining("'nope'") },
    });
  });

  it('POST /api/requests/http replays to the local service, as it was and with changes', async () => {
    const [captured] = (await curl([`${api}/api/requests/http`])).body.requests as Array<{
      id: string;
    }>;
    const before = received.length;
    const replay = await curl([
      `${api}/api/requests/http`,
      '-H',
      'content-type: application/json',
      '--data',
      JSON.stringify({ id: captured!.id }),
    ]);
    expect(replay.status).toBe(204);
    expect(received[before]).toBe('POST /hook?from=jq {"event":"push"}');
    const changed = await curl([
      `${api}/api/requests/http`,
      '--data-urlencode',
      `id=${captured!.id}`,
      '--data-urlencode',
      'body={"event":"tag"}',
      '--data-urlencode',
      'uri=/hook?from=replay',
    ]);
    expect(changed.status).toBe(204);
    expect(received[before + 1]).toBe('POST /hook?from=replay {"event":"tag"}');
    const requests = (await curl([`${api}/api/requests/http`])).body.requests as CapturedRequest[];
    expect(requests[0]).toMatchObject({
      replay_of: captured!.id,
      request: { uri: '/hook?from=replay' },
      response: { status_code: 200 },
    });
    const bad = await curl([
      `${api}/api/requests/http`,
      '-H',
      'content-type: application/json',
      '--data',
      '{}',
    ]);
    expect(bad).toMatchObject({
      status: 400,
      body: { status_code: 400, details: { field: 'id' } },
    });

    expect((await curl([`${api}/api/requests/http`, '-X', 'DELETE'])).status).toBe(204);
    expect((await curl([`${api}/api/requests/http`])).body.requests).toEqual([]);
  });

  it('POST /api/tunnels starts a named tunnel (JSON or form), DELETE stops it', async () => {
    const made = await curl([
      `${api}/api/tunnels`,
      '-H',
      'content-type: application/json',
      '--data',
      JSON.stringify({ name: 'second', proto: 'http', addr: String(service.port) }),
    ]);
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({
      name: 'second',
      uri: '/api/tunnels/second',
      proto: 'https',
      config: { inspect: true },
    });
    expect(await curlUrl(made.body.public_url as string, '/via-second')).toMatchObject({
      status: 200,
      body: { seen: '/via-second' },
    });
    const again = await curl([
      `${api}/api/tunnels`,
      '--data',
      `name=second&proto=http&addr=${service.port}`,
    ]);
    expect(again).toMatchObject({ status: 409, body: { status_code: 409 } });
    const form = await curl([
      `${api}/api/tunnels`,
      '--data',
      `name=raw&proto=tcp&addr=${service.port}`,
    ]);
    expect(form.status, form.text).toBe(201);
    expect(form.body.public_url).toMatch(/^tcp:\/\//);
    const badProto = await curl([`${api}/api/tunnels`, '--data', 'name=x&proto=udp&addr=80']);
    expect(badProto).toMatchObject({
      status: 400,
      body: { error_code: 102, status_code: 400, details: { field: 'proto' } },
    });
    const unsupported = await curl([
      `${api}/api/tunnels`,
      '--data',
      'name=x&proto=http&addr=80&crt=/tmp/x',
    ]);
    expect(unsupported).toMatchObject({
      status: 400,
      body: { msg: expect.stringContaining('crt is not supported') },
    });

    expect((await curl([`${api}/api/tunnels/second`, '-X', 'DELETE'])).status).toBe(204);
    expect((await curl([`${api}/api/tunnels/raw`, '-X', 'DELETE'])).status).toBe(204);
    expect((await curl([`${api}/api/tunnels/second`])).status).toBe(404);
    expect(
      (await curl([`${api}/api/tunnels`])).body.tunnels.map((t: { name: string }) => t.name),
    ).toEqual(['command_line']);
  });

  it('GET /api lists the resources, /api/status the session; a wrong method is 405, a wrong path 404', async () => {
    expect((await curl([`${api}/api`])).body).toMatchObject({
      tunnels_uri: '/api/tunnels',
      requests_uri: '/api/requests/http',
    });
    const status = await curl([`${api}/api/status`]);
    expect(status.body).toMatchObject({
      uri: '/api/status',
      version: BURROW_VERSION,
      session: { server_addr: `127.0.0.1:${edge.ports.agent}`, connected: true },
      tunnels: [{ name: 'command_line', public_url: publicUrl }],
    });
    expect((await curl([`${api}/api/tunnels/command_line`, '-X', 'PUT'])).body).toMatchObject({
      error_code: 101,
      status_code: 405,
    });
    expect((await curl([`${api}/api/nothing`])).body).toMatchObject({
      error_code: 100,
      status_code: 404,
    });
    // command_line is a tunnel: /api/endpoints neither lists it nor shows or stops it by name.
    expect((await curl([`${api}/api/endpoints`])).body.endpoints).toEqual([]);
    for (const method of ['GET', 'DELETE']) {
      expect((await curl([`${api}/api/endpoints/command_line`, '-X', method])).body).toMatchObject({
        status_code: 404,
        msg: expect.stringContaining('/api/tunnels/command_line'),
      });
    }
  });

  it('refuses other sites: a foreign Host (DNS rebinding) and a change from another Origin', async () => {
    const rebound = await curl([`${api}/api/tunnels`, '-H', 'Host: evil.example:4040']);
    expect(rebound.status).toBe(403);
    const csrf = await curl([
      `${api}/api/tunnels`,
      '-H',
      'Origin: http://evil.example',
      '--data',
      `name=csrf&proto=tcp&addr=22`,
    ]);
    expect(csrf.status).toBe(403);
    expect((await curl([`${api}/api/tunnels`])).body.tunnels).toHaveLength(1);
  });

  it('a taken port moves to the next free one; --web-addr false turns the API off', async () => {
    const taken = await startHttpUpstream((_req, res) => res.end('someone else'));
    const moved = await startHttp(['--web-addr', `127.0.0.1:${taken.port}`]);
    const address = await webInterface(moved);
    expect(Number(new URL(address).port)).toBeGreaterThan(taken.port);
    expect((await curl([`${address}/api/tunnels`])).body.tunnels).toHaveLength(1);
    moved.child.kill('SIGINT');
    await moved.exit;
    await taken.close();

    const off = await startHttp(['--web-addr', 'false']);
    await until(() => /^Forwarding /m.test(off.stdout()), 20_000);
    expect(off.stdout()).not.toMatch(/Web Interface/);
    off.child.kill('SIGINT');
    expect(await off.exit, `${String(off.child.signalCode)} ${off.stderr()}`).toBe(0);
  });

  it('beyond loopback the API needs a credential: refused without one, asked of every request with it', async () => {
    const port = await freePort();
    const open = await startHttp(['--web-addr', `0.0.0.0:${port}`]);
    expect(await open.exit).toBe(1);
    expect(open.stderr()).toMatch(/is not a loopback address.*--web-auth user:password/);

    const guarded = await startHttp(['--web-addr', `0.0.0.0:${port}`], {
      BURROW_WEB_AUTH: 'dev:s3cret',
    });
    const address = await webInterface(guarded);
    expect(guarded.stderr()).toMatch(
      /warning: the agent API listens on 0\.0\.0\.0:\d+, beyond this machine/,
    );
    const local = address.replace('0.0.0.0', '127.0.0.1');
    const anonymous = await curl([`${local}/api/tunnels`]);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Basic/);
    expect((await curl([`${local}/api/tunnels`, '-u', 'dev:wrong'])).status).toBe(401);
    expect((await curl([`${local}/api/tunnels`, '-u', 'dev:s3cret'])).status).toBe(200);
    guarded.child.kill('SIGINT');
    await guarded.exit;
  });
});
