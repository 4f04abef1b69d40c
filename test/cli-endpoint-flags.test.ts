import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { startSdkTestEdge, type SdkTestEdge } from './support/sdk-edge.js';
import { curl } from './support/curl.js';
import { spawnBurrow, type RunningBurrow } from './support/server-process.js';

/**
 * ngrok's endpoint flags on the compiled `burrow http` (run `npm run build` first): each becomes a
 * traffic policy rule the edge enforces, with real curl as the public client.
 */

const burrow = spawnBurrow;

async function forwardingUrl(run: RunningBurrow): Promise<string> {
  await until(
    () => /^Forwarding \S+ -> \S+$/m.test(run.stdout()) || run.child.exitCode !== null,
    15_000,
  );
  const m = /^Forwarding (\S+) -> \S+$/m.exec(run.stdout());
  if (!m) throw new Error(`no Forwarding line: ${run.stdout()} ${run.stderr()}`);
  return m[1]!;
}

describe('burrow http with ngrok endpoint flags', () => {
  let edge: SdkTestEdge;
  let web: LocalServer;
  let home: string;
  const seen: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    edge = await startSdkTestEdge('sqlite');
    web = await startHttpUpstream((req, res) => {
      seen.push(req.headers);
      res.end('hello');
    });
    home = mkdtempSync(join(tmpdir(), 'burrow-cli-flags-'));
  });
  afterAll(async () => {
    await web.close();
    await edge.close();
    rmSync(home, { recursive: true, force: true });
  });

  const get = (url: string, extra: string[] = []) => {
    const host = new URL(url).hostname;
    return curl([
      `${url}/`,
      '--cacert',
      edge.caFile,
      '--connect-to',
      `${host}:8443:127.0.0.1:${edge.httpsPort}`,
      ...extra,
    ]);
  };

  it('--basic-auth and --request-header-add are enforced by the edge; --cidr-deny refuses', async () => {
    const env = { XDG_CONFIG_HOME: join(home, 'none') };
    const connection = async () => [
      '--server',
      edge.serverAddr,
      '--authtoken',
      await edge.token(),
      '--ca',
      edge.caFile,
    ];
    const guarded = burrow(
      [
        'http',
        String(web.port),
        '--basic-auth',
        'ops:correct-horse',
        '--request-header-add',
        'x-env:dev',
        ...(await connection()),
      ],
      env,
    );
    const fenced = burrow(
      ['http', String(web.port), '--cidr-deny', '127.0.0.0/8', ...(await connection())],
      env,
    );
    const [guardedUrl, fencedUrl] = await Promise.all([
      forwardingUrl(guarded),
      forwardingUrl(fenced),
    ]);

    const anonymous = await get(guardedUrl);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Basic realm=/);
    expect(seen).toHaveLength(0);
    const wrong = await get(guardedUrl, ['-u', 'ops:wrong-horse']);
    expect(wrong.status).toBe(401);
    const ok = await get(guardedUrl, ['-u', 'ops:correct-horse']);
    expect(ok).toMatchObject({ status: 200, text: 'hello' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!['x-env']).toBe('dev');

    const refused = await get(fencedUrl);
    expect(refused.status).toBe(403);
    expect(seen).toHaveLength(1);

    guarded.child.kill('SIGINT');
    fenced.child.kill('SIGINT');
    expect(await guarded.exit).toBe(0);
    expect(await fenced.exit).toBe(0);
  });

  it('--host-header rewrite: the service gets its own host:port as Host, the public host in X-Forwarded-Host', async () => {
    const run = burrow(
      [
        'http',
        String(web.port),
        '--host-header',
        'rewrite',
        '--server',
        edge.serverAddr,
        '--authtoken',
        await edge.token(),
        '--ca',
        edge.caFile,
      ],
      { XDG_CONFIG_HOME: join(home, 'none') },
    );
    const url = await forwardingUrl(run);
    const before = seen.length;
    expect(await get(url)).toMatchObject({ status: 200, text: 'hello' });
    expect(seen).toHaveLength(before + 1);
    expect(seen[before]!.host).toBe(`localhost:${web.port}`);
    expect(seen[before]!['x-forwarded-host']).toBe(`${new URL(url).hostname}:8443`);
    run.child.kill('SIGINT');
    expect(await run.exit).toBe(0);
  });

  it('--host-header with a literal host is refused before connecting', async () => {
    const run = burrow(
      [
        'http',
        '3000',
        '--host-header',
        'example.com',
        '--server',
        '127.0.0.1:1',
        '--authtoken',
        'x',
      ],
      { XDG_CONFIG_HOME: join(home, 'none') },
    );
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toMatch(
      /^burrow: --host-header: "example\.com" is not supported: only "rewrite"/m,
    );
  });

  it('a bad flag fails before connecting, naming the flag', async () => {
    const run = burrow(
      ['http', '3000', '--basic-auth', 'ops:short', '--server', '127.0.0.1:1', '--authtoken', 'x'],
      { XDG_CONFIG_HOME: join(home, 'none') },
    );
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toMatch(
      /^burrow: --basic-auth: the password of user "ops" must have 8 to 128 characters/m,
    );
    expect(run.stderr()).not.toMatch(/failed to connect/);
  });
});
