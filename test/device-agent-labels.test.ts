import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { curl, type CurlReply } from './support/curl.js';
import { createAuthtoken, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { freePort, spawnBurrow, type RunningBurrow } from './support/server-process.js';

/**
 * The device agent's labeled tunnels serving real traffic through edges, as the README's TCP edge
 * story does with `burrow tcp --label`: a real `burrow server`, edges and tunnel-group backends
 * made through the API, a real `burrow agent` process driven with curl, and curl as the public
 * client: plain HTTP through a TCP edge, HTTPS through a TLS edge that terminates TLS. The agent
 * is killed and started again (its labeled tunnels come back from the state file), and a delete
 * takes the tunnel off its edge. Run `npm run build` first.
 */

/** A port outside Linux's ephemeral range (client sockets) and the 20000s other servers use. */
async function freeHighPort(): Promise<number> {
  for (;;) {
    const port = 21000 + Math.floor(Math.random() * 11000);
    const server = createServer().listen(port, '127.0.0.1');
    const free = await once(server, 'listening').then(
      () => true,
      () => false,
    );
    server.close();
    if (free) return port;
  }
}

describe('burrow agent: labeled tunnels behind TCP and TLS edges', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  let home: string;
  let token: string;
  let tcpPort: number;
  let apiPort: number;
  const shop = 'shop.edges.burrow.test';
  const runs: RunningBurrow[] = [];

  const ok = (res: CurlReply, status = 200): CurlReply => {
    expect(res.status, res.text).toBe(status);
    return res;
  };
  const startAgent = async (): Promise<RunningBurrow> => {
    const run = spawnBurrow(
      [
        'agent',
        ...['--server', `127.0.0.1:${edge.ports.agent}`, '--ca', edge.caFile],
        ...['--listen', `127.0.0.1:${apiPort}`],
      ],
      { BURROW_AUTHTOKEN: token },
      home,
    );
    runs.push(run);
    await until(
      () => run.stdout().includes('"connected to the server"') || run.child.exitCode !== null,
      30_000,
    );
    if (run.child.exitCode !== null) throw new Error(`the agent exited: ${run.stderr()}`);
    return run;
  };
  const local = (method: string, path: string, body?: unknown): Promise<CurlReply> => {
    const args = ['-X', method, `http://127.0.0.1:${apiPort}${path}`];
    if (body !== undefined) {
      args.push('-H', 'Content-Type: application/json', '-d', JSON.stringify(body));
    }
    return curl(args);
  };
  /** Through the TCP edge: plain HTTP to its reserved address. */
  const viaTcp = (path: string) =>
    curl([`http://127.0.0.1:${tcpPort}${path}`, '--max-time', '5']).catch(() => undefined);
  /** Through the TLS edge: HTTPS to the reserved name, TLS ended at the edge by the server's CA. */
  const viaTls = (path: string) =>
    curl([
      `https://${shop}:${edge.ports.https}${path}`,
      ...['--cacert', edge.caFile, '--resolve', `${shop}:${edge.ports.https}:127.0.0.1`],
      ...['--max-time', '5'],
    ]).catch(() => undefined);
  const eventually = async (
    probe: () => Promise<CurlReply | undefined>,
    ready: (r: CurlReply | undefined) => boolean,
  ): Promise<CurlReply | undefined> => {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const reply = await probe();
      if (ready(reply) || Date.now() > deadline) return reply;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  const served = (r: CurlReply | undefined) => r?.status === 200;
  const groupTunnels = async (backend: string): Promise<unknown[]> =>
    ok(await edge.api.get(`/backends/tunnel_group/${backend}`)).body.tunnels as unknown[];

  let tcpBackend: string;
  let tlsBackend: string;

  beforeAll(async () => {
    tcpPort = await freeHighPort();
    edge = await startEdgeServer('sqlite', ['--tcp-ports', `${tcpPort}-${tcpPort}`]);
    apiPort = await freePort();
    home = mkdtempSync(join(tmpdir(), 'burrow-device-labels-'));
    web = await startHttpUpstream((req, res) => res.end(`device says ${req.url}`));
    const { api } = edge;

    // The README's TCP edge: a reserved address, a backend selecting the label, the edge.
    const addr = ok(await api.post('/reserved_addrs', { description: 'web over tcp' }), 201).body
      .addr as string;
    expect(addr).toMatch(new RegExp(`:${tcpPort}$`));
    tcpBackend = ok(await api.post('/backends/tunnel_group', { labels: { sitea: 'web' } }), 201)
      .body.id as string;
    ok(
      await api.post('/edges/tcp', { hostports: [addr], backend: { backend_id: tcpBackend } }),
      201,
    );
    // A TLS edge that ends TLS with the server's certificate, so the device serves plain HTTP.
    ok(await api.post('/reserved_domains', { domain: shop }), 201);
    tlsBackend = ok(
      await api.post('/backends/tunnel_group', { labels: { sitea: 'shop', tier: 'front' } }),
      201,
    ).body.id as string;
    ok(
      await api.post('/edges/tls', {
        hostports: [`${shop}:${edge.ports.https}`],
        backend: { backend_id: tlsBackend },
        tls_termination: { terminate_at: 'edge' },
      }),
      201,
    );
    // The device may bind any label whose key is its site (and a tier), nothing else.
    token = await createAuthtoken(edge.api, { acl: ['bind:sitea=*', 'bind:tier=*'] });
  }, 90_000);

  afterAll(async () => {
    for (const run of runs) if (run.child.exitCode === null) run.child.kill('SIGKILL');
    await web?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('serves both edges from labeled tunnels created through the agent API', async () => {
    await startAgent();
    const tcpTunnel = ok(
      await local('POST', '/tunnels', { forwards_to: `:${web.port}`, labels: { sitea: 'web' } }),
    );
    expect(tcpTunnel.body).toEqual({
      url: null,
      url_part: 'sitea=web',
      protocol: 'labeled',
      forwards_to: `:${web.port}`,
      domain: null,
      labels: { sitea: 'web' },
      policy: null,
    });
    // The list form, as `--label` writes labels; named by its labels sorted by key.
    const tlsTunnel = ok(
      await local('POST', '/tunnels', {
        forwards_to: `localhost:${web.port}`,
        labels: ['tier=front', 'sitea=shop'],
      }),
    );
    expect(tlsTunnel.body).toMatchObject({ url_part: 'sitea=shop,tier=front', url: null });

    const tcp = await eventually(() => viaTcp('/over-tcp'), served);
    expect(tcp).toMatchObject({ status: 200, text: 'device says /over-tcp' });
    const tls = await eventually(() => viaTls('/over-tls'), served);
    expect(tls).toMatchObject({ status: 200, text: 'device says /over-tls' });
    expect(await groupTunnels(tcpBackend)).toHaveLength(1);
    expect(await groupTunnels(tlsBackend)).toHaveLength(1);

    const refused = await local('POST', '/tunnels', { forwards_to: ':1', labels: { app: 'x' } });
    expect(refused).toMatchObject({
      status: 403,
      body: { code: 'ERR_NGROK_399', field: 'labels' },
    });
    const twice = await local('POST', '/tunnels', { forwards_to: ':1', labels: ['sitea=web'] });
    expect(twice).toMatchObject({ status: 409, body: { field: 'labels' } });
  });

  it('brings the labeled tunnels back from the state file after SIGKILL', async () => {
    const before = ok(await local('GET', '/tunnels')).body as unknown[];
    expect(before).toHaveLength(2);
    const stored = JSON.parse(readFileSync(join(home, 'tunnels.json'), 'utf8')) as {
      tunnels: unknown[];
    };
    expect(stored.tunnels).toEqual([
      {
        protocol: 'labeled',
        labels: { sitea: 'web' },
        forwards_to: `:${web.port}`,
        created_at: expect.any(String) as string,
      },
      {
        protocol: 'labeled',
        labels: { tier: 'front', sitea: 'shop' },
        forwards_to: `localhost:${web.port}`,
        created_at: expect.any(String) as string,
      },
    ]);
    const old = runs.at(-1)!;
    old.child.kill('SIGKILL');
    await old.exit;
    const agent = await startAgent();
    await until(() => (agent.stdout().match(/"tunnel restored"/g) ?? []).length === 2, 20_000);
    expect(ok(await local('GET', '/tunnels')).body).toEqual(before);
    expect(await eventually(() => viaTcp('/again'), served)).toMatchObject({
      text: 'device says /again',
    });
    expect(await eventually(() => viaTls('/again'), served)).toMatchObject({
      text: 'device says /again',
    });
  });

  it('DELETE by labels (any order) takes the tunnel off its edge', async () => {
    const path = `/tunnels/${encodeURIComponent('tier=front,sitea=shop')}`;
    expect(await local('DELETE', path)).toMatchObject({ status: 204, text: '' });
    expect(await groupTunnels(tlsBackend)).toEqual([]);
    const gone = await eventually(
      () => viaTls('/gone'),
      (r) => !served(r),
    );
    expect(served(gone)).toBe(false);
    expect(ok(await local('GET', '/tunnels')).body).toMatchObject([{ url_part: 'sitea=web' }]);
    expect((await viaTcp('/still')) ?? {}).toMatchObject({ status: 200 });
    expect((await local('DELETE', path)).status).toBe(404);
  });
});
