import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { readAll, until } from './support/mux.js';
import { startSdkTestEdge, type SdkTestEdge } from './support/sdk-edge.js';
import { curl } from './support/curl.js';
import { spawnBurrow, type RunningBurrow } from './support/server-process.js';

/**
 * The quick tunnels as a user runs them: the compiled `burrow` command (run `npm run build`
 * first) against an edge, with real curl as the public client.
 */

const burrow = spawnBurrow;

async function forwardingLine(run: RunningBurrow): Promise<{ url: string; target: string }> {
  await until(
    () => /^Forwarding \S+ -> \S+$/m.test(run.stdout()) || run.child.exitCode !== null,
    15_000,
  );
  const m = /^Forwarding (\S+) -> (\S+)$/m.exec(run.stdout());
  if (!m) throw new Error(`no Forwarding line: ${run.stdout()} ${run.stderr()}`);
  return { url: m[1]!, target: m[2]! };
}

describe('burrow http|tcp|tls and config add-authtoken', () => {
  let edge: SdkTestEdge;
  let web: LocalServer;
  let echo: LocalServer;
  let home: string;

  beforeAll(async () => {
    edge = await startSdkTestEdge('sqlite');
    web = await startHttpUpstream((req, res) => res.end(`hello from ${req.url}`));
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
    home = mkdtempSync(join(tmpdir(), 'burrow-cli-home-'));
  });
  afterAll(async () => {
    await web.close();
    await echo.close();
    await edge.close();
    rmSync(home, { recursive: true, force: true });
  });

  it('burrow http prints the URL, serves it, logs each request and stops on Ctrl-C', async () => {
    const token = await edge.token();
    const run = burrow(
      [
        'http',
        String(web.port),
        '--server',
        edge.serverAddr,
        '--authtoken',
        token,
        '--ca',
        edge.caFile,
      ],
      { XDG_CONFIG_HOME: join(home, 'none') },
    );
    const { url, target } = await forwardingLine(run);
    expect(url).toMatch(/^https:\/\/[a-z0-9]{10}\.burrow\.test:8443$/);
    expect(target).toBe(`localhost:${web.port}`);
    const host = new URL(url).hostname;
    const reply = await curl([
      `${url}/hello?from=curl`,
      '--cacert',
      edge.caFile,
      '--connect-to',
      `${host}:8443:127.0.0.1:${edge.httpsPort}`,
    ]);
    expect(reply).toMatchObject({ status: 200, text: 'hello from /hello?from=curl' });
    await until(() => /GET\s+\/hello\?from=curl 200 \d+ms/.test(run.stdout()), 5000);
    expect(run.stdout()).toMatch(/^\d\d:\d\d:\d\d\.\d{3} GET {4}\/hello\?from=curl 200 \d+ms$/m);

    run.child.kill('SIGINT');
    expect(await run.exit).toBe(0);
    expect(edge.registry.listTunnels().some((t) => t.url === url)).toBe(false);
  });

  it('config add-authtoken writes a 0600 file that burrow tcp then uses without flags', async () => {
    const env = { XDG_CONFIG_HOME: join(home, 'cfg') };
    const token = await edge.token();
    const saved = burrow(
      ['config', 'add-authtoken', token, '--server', edge.serverAddr, '--ca', edge.caFile],
      env,
    );
    expect(await saved.exit).toBe(0);
    const file = join(home, 'cfg', 'burrow', 'config.yaml');
    expect(saved.stdout()).toContain(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, 'cfg', 'burrow')).mode & 0o777).toBe(0o700);
    expect(parseYaml(readFileSync(file, 'utf8'))).toEqual({
      authtoken: token,
      server_addr: edge.serverAddr,
      ca: edge.caFile,
    });

    const run = burrow(['tcp', `127.0.0.1:${echo.port}`], env);
    const { url, target } = await forwardingLine(run);
    expect(url).toMatch(/^tcp:\/\/tcp\.burrow\.test:20\d{3}$/);
    expect(target).toBe(`127.0.0.1:${echo.port}`);
    const port = Number(new URL(url).port);
    await edge.ingress.tcp.listening(port);
    const client = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(client, 'connect');
    client.end('through the CLI');
    expect(String(await readAll(client))).toBe('through the CLI');
    await until(() => /connection from 127\.0\.0\.1:\d+/.test(run.stdout()), 5000);
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
  });

  it('fails with the server code for a bad authtoken, without a token, with a missing policy file', async () => {
    const bad = burrow(['http', '3000', '--server', edge.serverAddr, '--ca', edge.caFile], {
      BURROW_AUTHTOKEN: 'garbage',
      XDG_CONFIG_HOME: join(home, 'none'),
    });
    expect(await bad.exit).toBe(1);
    expect(bad.stderr()).toMatch(/^burrow: The authtoken is malformed.*\(ERR_NGROK_105\)$/m);

    const none = burrow(['tls', '443', '--server', edge.serverAddr], {
      XDG_CONFIG_HOME: join(home, 'none'),
    });
    expect(await none.exit).toBe(1);
    expect(none.stderr()).toMatch(/no authtoken: pass --authtoken, set BURROW_AUTHTOKEN/);

    const policy = burrow([
      'http',
      '3000',
      '--authtoken',
      'x',
      '--policy-file',
      join(home, 'nope.yml'),
    ]);
    expect(await policy.exit).toBe(1);
    expect(policy.stderr()).toMatch(/cannot read the policy file .*nope\.yml/);
  });
});
