import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
 * `burrow agent --web-addr`: the device agent keeps its /tunnels API and gains the inspector. A
 * tunnel made with POST /tunnels is listed by /api/tunnels under its url_part, its requests are
 * captured and replayed; the tunnels cannot be started or stopped through /api (405: they live
 * in the state file). Against a real `burrow server`; run `npm run build` first.
 */
describe('the device agent with --web-addr', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let work: string;
  let agent: RunningBurrow;
  let listen: string;
  let inspector: string;
  const received: string[] = [];

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    const token = await createAuthtoken(edge.api, { description: 'device inspector' });
    work = mkdtempSync(join(tmpdir(), 'burrow-device-inspector-'));
    service = await startHttpUpstream((req, res) => {
      received.push(`${req.method} ${req.url}`);
      res.end(`device service got ${req.url}`);
    });
    listen = `127.0.0.1:${await freePort()}`;
    inspector = `127.0.0.1:${await freePort()}`;
    agent = spawnBurrow(
      [
        'agent',
        ...['--server', `127.0.0.1:${edge.ports.agent}`, '--authtoken', token, '--ca', edge.caFile],
        ...['--listen', listen, '--state', join(work, 'tunnels.json'), '--web-addr', inspector],
      ],
      { HOME: work },
      work,
    );
    const ready = () =>
      agent.stdout().includes('agent inspector listening') &&
      agent.stdout().includes('connected to the server');
    await until(() => ready() || agent.child.exitCode !== null, 30_000);
    expect(agent.child.exitCode, agent.stdout() + agent.stderr()).toBeNull();
  });
  afterAll(async () => {
    agent?.child.kill('SIGTERM');
    await agent?.exit;
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('captures the requests of a tunnel made with POST /tunnels, and replays them', async () => {
    const created = await curl([
      `http://${listen}/tunnels`,
      ...['-H', 'Content-Type: application/json', '-d'],
      JSON.stringify({
        protocol: 'http',
        forwards_to: `:${service.port}`,
        domain: 'device.burrow.test',
      }),
    ]);
    expect(created.status, created.text).toBe(200);
    const urlPart = created.body.url_part as string;
    const reply = await ingressCurl(
      () => edge.ports,
      () => edge.caFile,
    )(created.body.url as string, '/reading?t=21');
    expect(reply).toMatchObject({ status: 200, text: 'device service got /reading?t=21' });

    const tunnels = await curl([`http://${inspector}/api/tunnels`]);
    expect(tunnels.body.tunnels).toMatchObject([
      { name: urlPart, public_url: created.body.url, config: { inspect: true } },
    ]);
    await until(() => received.length === 1);
    let requests: CapturedRequest[] = [];
    for (let tries = 0; requests.length === 0 && tries < 50; tries++) {
      requests = (await curl([`http://${inspector}/api/requests/http`])).body.requests;
      if (requests.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(requests[0]).toMatchObject({
      tunnel_name: urlPart,
      request: { method: 'GET', uri: '/reading?t=21' },
      response: { status_code: 200 },
    });
    const replay = await curl([
      `http://${inspector}/api/requests/http`,
      '--data',
      `id=${requests[0]!.id}`,
    ]);
    expect(replay.status, replay.text).toBe(204);
    expect(received).toEqual(['GET /reading?t=21', 'GET /reading?t=21']);
  });

  it('its tunnels are not started or stopped through /api: 405 names the /tunnels API', async () => {
    const start = await curl([
      `http://${inspector}/api/tunnels`,
      '--data',
      'name=x&proto=http&addr=80',
    ]);
    expect(start).toMatchObject({
      status: 405,
      body: { msg: expect.stringContaining('POST /tunnels') },
    });
    const [tunnel] = (await curl([`http://${inspector}/api/tunnels`])).body.tunnels as Array<{
      name: string;
    }>;
    const stop = await curl([`http://${inspector}/api/tunnels/${tunnel!.name}`, '-X', 'DELETE']);
    expect(stop.status).toBe(405);
    expect((await curl([`http://${inspector}/api/tunnels`])).body.tunnels).toHaveLength(1);
  });

  it("/api/status gives burrow's version", async () => {
    const status = await curl([`http://${inspector}/api/status`]);
    expect(status.body).toMatchObject({ uri: '/api/status', version: BURROW_VERSION });
  });
});
