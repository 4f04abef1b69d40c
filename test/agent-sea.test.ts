import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl } from './support/curl.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { freePort, REPO_ROOT } from './support/server-process.js';

/**
 * The self-contained agent (issue 34): `npm run build:agent` makes dist/sea/burrow-agent, a Node
 * single executable application, and that file alone, run with an empty environment (no PATH,
 * so no Node to find) from a folder outside the clone, serves a tunnel through a real `burrow
 * server`: its device agent API creates the tunnel and a request through the edge reaches the
 * local service.
 */

const run = promisify(execFile);
const EXECUTABLE = join(REPO_ROOT, 'dist', 'sea', 'burrow-agent');

describe('burrow-agent, the single executable agent', () => {
  let edge: EdgeServer;
  let web: LocalServer;
  let work: string;
  let agent: ChildProcessWithoutNullStreams | undefined;

  beforeAll(async () => {
    await run('npm', ['run', 'build:agent'], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 });
    work = mkdtempSync(join(tmpdir(), 'burrow-sea-'));
    web = await startHttpUpstream((req, res) => res.end(`served without node: ${req.url}`));
    edge = await startEdgeServer('sqlite');
  }, 300_000);

  afterAll(async () => {
    agent?.kill('SIGKILL');
    await web?.close();
    await edge?.server.stop();
    await edge?.db.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('prints its version with nothing in the environment', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    const { stdout } = await run(EXECUTABLE, ['--version'], { cwd: work, env: {} });
    expect(stdout.trim()).toBe(version);
  });

  it('has burrow start, whose ngrok.yml files config check reads', async () => {
    const { stdout } = await run(EXECUTABLE, ['start', '--help'], { cwd: work, env: {} });
    expect(stdout).toMatch(/^Usage: burrow-agent start .*\[names\.\.\.\]/m);
  });

  it('runs the device agent against a real server: a tunnel it creates serves requests', async () => {
    const token = await createAuthtoken(edge.api, { description: 'single executable' });
    const listen = `127.0.0.1:${await freePort()}`;
    agent = spawn(
      EXECUTABLE,
      [
        'agent',
        ...['--server', `127.0.0.1:${edge.ports.agent}`, '--authtoken', token],
        ...['--ca', edge.caFile, '--listen', listen, '--state', join(work, 'tunnels.json')],
      ],
      { cwd: work, env: { HOME: work } },
    );
    let out = '';
    agent.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    agent.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    // Ready once the local API listens and the session is up (the API answers 503 before).
    const ready = () =>
      out.includes('agent API listening') && out.includes('connected to the server');
    await until(() => ready() || agent!.exitCode !== null, 30_000);
    expect(agent.exitCode, out).toBeNull();

    const created = await curl([
      `http://${listen}/tunnels`,
      '-H',
      'Content-Type: application/json',
      '-d',
      JSON.stringify({ protocol: 'http', forwards_to: `:${web.port}`, domain: 'sea.burrow.test' }),
    ]);
    expect(created.status, created.text).toBe(200);
    const url = created.body.url as string;
    const reply = await ingressCurl(
      () => edge.ports,
      () => edge.caFile,
    )(url, '/hello');
    expect(reply).toMatchObject({ status: 200, text: 'served without node: /hello' });
  }, 60_000);
});
