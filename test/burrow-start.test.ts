import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl } from './support/curl.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { NGROK_V2_EXAMPLE, NGROK_V3_ENDPOINT } from './support/ngrok-examples.js';
import { until } from './support/mux.js';
import { freePort, runBurrow, spawnBurrow, type RunningBurrow } from './support/server-process.js';

/**
 * `burrow start` with ngrok.yml files of version 2 and 3 (ngrok's own examples, as printed, and
 * files with every session key), against a real `burrow server`; the tunnels are read back from
 * the agent API and fetched through the edge. Run `npm run build` first.
 */

describe('burrow start with ngrok.yml', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let dir: string;
  let token: string;
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  function file(name: string, text: string): string {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  }

  async function start(args: string[]): Promise<{ run: RunningBurrow; api: string }> {
    const port = await freePort();
    const run = spawnBurrow(['start', ...args, '--web-addr', `127.0.0.1:${port}`], {
      XDG_CONFIG_HOME: join(dir, 'none'),
      HOME: join(dir, 'home'),
    });
    await until(() => /^Web Interface /m.test(run.stdout()) || run.child.exitCode !== null, 20_000);
    return { run, api: `http://127.0.0.1:${port}` };
  }

  async function tunnels(api: string, count: number): Promise<Array<Record<string, string>>> {
    let list: Array<Record<string, string>> = [];
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      list = (await curl([`${api}/api/tunnels`])).body?.tunnels ?? [];
      if (list.length >= count) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return list;
  }

  async function stop(run: RunningBurrow): Promise<void> {
    run.child.kill('SIGINT');
    expect(await run.exit).toBe(0);
  }

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    token = await createAuthtoken(edge.api, { description: 'burrow start' });
    dir = mkdtempSync(join(tmpdir(), 'burrow-start-'));
    service = await startHttpUpstream((req, res) => res.end(`service got ${req.url}`));
  });
  afterAll(async () => {
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("starts the tunnel of ngrok's version 2 example (the session from flags) and says api_key is ignored", async () => {
    const config = file('v2-example.yml', NGROK_V2_EXAMPLE);
    const { run, api } = await start([
      '--all',
      '--config',
      config,
      '--authtoken',
      token,
      '--server',
      `127.0.0.1:${edge.ports.agent}`,
      '--ca',
      edge.caFile,
    ]);
    const [basic] = await tunnels(api, 1);
    expect(basic).toMatchObject({
      name: 'basic',
      proto: 'https',
      config: { addr: 'localhost:80' },
    });
    expect(run.stdout()).toMatch(
      new RegExp(`^Forwarding basic ${basic!.public_url} -> localhost:80$`, 'm'),
    );
    expect(run.stderr()).toMatch(/ignoring .*v2-example\.yml:3 \(api_key\)/);
    await stop(run);
  });

  it('a version 2 file with the session keys: --all starts every tunnel, a name starts that one', async () => {
    const config = file(
      'v2.yml',
      [
        'version: "2"',
        `authtoken: ${token}`,
        `server_addr: 127.0.0.1:${edge.ports.agent}`,
        `root_cas: ${edge.caFile}`,
        'tunnels:',
        `  web: {proto: http, addr: ${service.port}, basic_auth: ["ops:correct-horse"]}`,
        `  raw: {proto: tcp, addr: ${service.port}}`,
        '',
      ].join('\n'),
    );
    const all = await start(['--all', '--config', config]);
    const list = await tunnels(all.api, 2);
    expect(list.map((t) => t.name).sort()).toEqual(['raw', 'web']);
    const web = list.find((t) => t.name === 'web')!;
    expect(web.config).toMatchObject({ basic_auth: ['ops:[redacted]'] });
    expect((await curlUrl(web.public_url!, '/x')).status).toBe(401);
    expect(await curlUrl(web.public_url!, '/x', ['-u', 'ops:correct-horse'])).toMatchObject({
      status: 200,
      text: 'service got /x',
    });
    await stop(all.run);

    const one = await start(['raw', '--config', config]);
    expect((await tunnels(one.api, 1)).map((t) => t.name)).toEqual(['raw']);
    await stop(one.run);
  });

  it("version 3: ngrok's endpoint example with its traffic policy, merged with a file of agent keys; /api/endpoints", async () => {
    const agentFile = file(
      'agent.yml',
      [
        'version: 3',
        'agent:',
        `  authtoken: ${token}`,
        `  connect_url: 127.0.0.1:${edge.ports.agent}`,
        `  connect_cas: ${edge.caFile}`,
        '',
      ].join('\n'),
    );
    const endpoints = file(
      'endpoints.yml',
      `version: 3\n${NGROK_V3_ENDPOINT}  - name: svc\n    upstream:\n      url: ${service.port}\n`,
    );
    const { run, api } = await start([
      'my-agent-endpoint',
      '--config',
      `${agentFile},${endpoints}`,
    ]);
    const [endpoint] = await tunnels(api, 1);
    expect(endpoint).toMatchObject({ name: 'my-agent-endpoint' });
    expect(await curlUrl(endpoint!.public_url!, '/')).toMatchObject({
      status: 200,
      text: 'Hello, World!',
    });
    const listed = await curl([`${api}/api/endpoints`]);
    expect(listed.body).toMatchObject({
      uri: '/api/endpoints',
      endpoints: [
        {
          name: 'my-agent-endpoint',
          url: endpoint!.public_url,
          upstream: { url: '80', protocol: 'http1' },
        },
      ],
    });
    // The same API starts the other endpoint of the file's kind.
    const made = await curl([
      `${api}/api/endpoints`,
      '-H',
      'content-type: application/json',
      '--data',
      JSON.stringify({ name: 'svc', upstream: { url: String(service.port) } }),
    ]);
    expect(made.status, made.text).toBe(201);
    expect(await curlUrl(made.body.url as string, '/v3')).toMatchObject({
      status: 200,
      text: 'service got /v3',
    });
    await stop(run);
  });

  it('an unknown or unsupported key stops start with the file, line and key; so do unknown names', async () => {
    const bad = file(
      'bad.yml',
      `version: 2\nauthtoken: ${token}\ntunnels:\n  web:\n    proto: http\n    addr: 80\n    websocket_tcp_converter: true\n`,
    );
    const run = spawnBurrow(['start', '--all', '--config', bad], { HOME: join(dir, 'home') });
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toMatch(
      /bad\.yml:7 \(tunnels\.web\.websocket_tcp_converter\): websocket_tcp_converter is not supported/,
    );
    const good = file(
      'good.yml',
      `authtoken: ${token}\ntunnels:\n  web: {proto: http, addr: 80}\n`,
    );
    const unknown = spawnBurrow(['start', 'nope', '--config', good], { HOME: join(dir, 'home') });
    expect(await unknown.exit).toBe(1);
    expect(unknown.stderr()).toMatch(
      /no tunnel or endpoint is named nope in the config; they are web/,
    );
  });

  it('config check says what start would read; config upgrade rewrites version 2 as version 3', async () => {
    const v2 = file('upgrade.yml', NGROK_V2_EXAMPLE);
    const check = await runBurrow(['config', 'check', '--config', v2]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain(`ignored: ${v2}:3 (api_key)`);
    expect(check.stdout).toContain(`Valid configuration (version 2) in ${v2}: basic (http)`);
    const upgrade = await runBurrow(['config', 'upgrade', '--config', v2]);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    const after = await runBurrow(['config', 'check', '--config', v2]);
    expect(after.stdout).toContain(`Valid configuration (version 3) in ${v2}: basic (http)`);
    const bad = await runBurrow([
      'config',
      'check',
      '--config',
      file('bad-check.yml', 'version: 2\nfoo: 1\n'),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/bad-check\.yml:2 \(foo\): unknown key foo/);
  });

  it('web_addr: false in the config turns the agent API off', async () => {
    const config = file(
      'off.yml',
      `version: 3\nagent:\n  authtoken: ${token}\n  connect_url: 127.0.0.1:${edge.ports.agent}\n  connect_cas: ${edge.caFile}\n  web_addr: false\nendpoints:\n  - name: svc\n    upstream: {url: ${service.port}}\n`,
    );
    const run = spawnBurrow(['start', '--all', '--config', config], { HOME: join(dir, 'home') });
    await until(
      () => /^Forwarding svc /m.test(run.stdout()) || run.child.exitCode !== null,
      20_000,
    );
    expect(run.stdout()).not.toMatch(/Web Interface/);
    await stop(run);
  });
});
