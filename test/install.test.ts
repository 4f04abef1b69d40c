import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import semver from 'semver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl, CurlApi } from './support/curl.js';
import { edgeServerArgs, freeEdgePorts, type EdgePorts } from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import {
  freePort,
  REPO_ROOT,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';

/**
 * `burrow` installed like a tool (issue 34): the project packed with `npm pack`, installed with
 * `npm install -g --prefix <tmp>` (its dependencies from npm's cache, else the registry), and the
 * installed `burrow` run by name from a folder outside the clone: `--version`, `server`,
 * `api-key create`, `http` and `agent`. Run `npm run build` first (the tarball takes `dist/` as it
 * is: `npm pack --ignore-scripts` skips the prepare build that `npm test` has just done).
 *
 * better-sqlite3 would otherwise compile for minutes here (its prebuilt binaries are on a host
 * this machine cannot reach): its install script is pointed, through prebuild-install's
 * documented mirror variable, at a loopback server that hands out the binary the clone already
 * built, which is what a connected machine downloads.
 */

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
  version: string;
  engines: { node: string };
};

/** A loopback "prebuilt binaries" host serving the clone's own better-sqlite3 build. */
async function betterSqliteMirror(work: string): Promise<{ url: string; server: Server }> {
  const moduleDir = join(REPO_ROOT, 'node_modules', 'better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(moduleDir, 'package.json'), 'utf8')) as {
    version: string;
  };
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const archive = join(work, name);
  await run('tar', ['-czf', archive, '-C', moduleDir, 'build/Release/better_sqlite3.node']);
  const body = readFileSync(archive);
  const server = createServer((req, res) => {
    if (req.url === `/v${version}/${name}`) res.end(body);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** A finished command's output; throws with both streams when it failed. */
async function sh(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) {
  try {
    return await run(command, args, { cwd, env, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${e.message}\n${e.stdout}\n${e.stderr}`);
  }
}

describe('engines', () => {
  it('claims no Node version a runtime dependency refuses', async () => {
    const { stdout } = await run('npm', ['ls', '--all', '--omit=dev', '--json', '--long'], {
      cwd: REPO_ROOT,
      maxBuffer: 64 * 1024 * 1024,
    });
    interface Dep {
      name?: string;
      version?: string;
      engines?: { node?: string };
      dependencies?: Record<string, Dep>;
    }
    const refusing: string[] = [];
    const walk = (dep: Dep): void => {
      for (const child of Object.values(dep.dependencies ?? {})) {
        const range = child.engines?.node;
        if (range && !semver.subset(pkg.engines.node, range))
          refusing.push(`${child.name}@${child.version} wants node ${range}`);
        walk(child);
      }
    };
    walk(JSON.parse(stdout) as Dep);
    expect(refusing).toEqual([]);
    // CI runs the suite on the Node of its machine: it must be one the project claims.
    expect(semver.satisfies(process.versions.node, pkg.engines.node)).toBe(true);
  });
});

describe('burrow installed with npm install -g from the packed project', () => {
  let work: string;
  let elsewhere: string;
  let env: NodeJS.ProcessEnv;
  let mirror: Server;
  let ports: EdgePorts;
  let server: BurrowServer | undefined;
  let web: LocalServer;
  const children: Array<ReturnType<typeof spawn>> = [];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'burrow-install-'));
    elsewhere = join(work, 'elsewhere');
    mkdirSync(elsewhere);
    const prefix = join(work, 'prefix');
    const packed = await sh(
      'npm',
      ['pack', '--ignore-scripts', '--pack-destination', work, '--silent'],
      REPO_ROOT,
      process.env,
    );
    const tarball = join(work, packed.stdout.trim().split('\n').pop()!);
    const binaries = await betterSqliteMirror(work);
    mirror = binaries.server;
    const installEnv = { ...process.env, npm_config_better_sqlite3_binary_host: binaries.url };
    await sh(
      'npm',
      ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball],
      elsewhere,
      installEnv,
    );
    const path = [join(prefix, 'bin'), process.env.PATH ?? ''].join(delimiter);
    env = { ...process.env, PATH: path, XDG_CONFIG_HOME: join(work, 'config') };
    for (const k of Object.keys(env)) if (k.startsWith('BURROW_')) delete env[k];
    web = await startHttpUpstream((_req, res) => res.end('hello from the installed burrow'));
  }, 600_000);

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await server?.stop();
    await web?.close();
    mirror?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('burrow --version prints the package version', async () => {
    const { stdout } = await sh('burrow', ['--version'], elsewhere, env);
    expect(stdout.trim()).toBe(pkg.version);
  });

  it('runs server, api-key create, http and agent from a folder outside the clone', async () => {
    ports = await freeEdgePorts();
    // Default data folder: ./burrow-data in `elsewhere`, where the other commands run too.
    server = await startBurrowServer(
      { dataDir: 'burrow-data', database: '' },
      { args: edgeServerArgs(ports), cwd: elsewhere, bin: { command: 'burrow', env } },
    );
    const key = (await sh('burrow', ['api-key', 'create'], elsewhere, env)).stdout.trim();
    const api = new CurlApi(server.url, key);
    const credential = await api.post('/credentials', { description: 'installed' });
    expect(credential.status, credential.text).toBe(201);
    const token = credential.body.token as string;
    const agentArgs = ['--server', `127.0.0.1:${ports.agent}`, '--authtoken', token];

    const tunnel = spawn('burrow', ['http', String(web.port), ...agentArgs], {
      cwd: elsewhere,
      env,
    });
    children.push(tunnel);
    let out = '';
    tunnel.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    await until(() => /^Forwarding \S+/m.test(out) || tunnel.exitCode !== null, 30_000);
    const url = new URL(/^Forwarding (\S+) -> /m.exec(out)![1]!);
    const reply = await curl([
      url.href,
      '--cacert',
      join(elsewhere, 'burrow-data', 'ca.pem'),
      '--connect-to',
      `${url.hostname}:${url.port || 443}:127.0.0.1:${ports.https}`,
    ]);
    expect(reply).toMatchObject({ status: 200, text: 'hello from the installed burrow' });

    const listen = `127.0.0.1:${await freePort()}`;
    const agent = spawn('burrow', ['agent', ...agentArgs, '--listen', listen], {
      cwd: elsewhere,
      env,
    });
    children.push(agent);
    let agentLog = '';
    agent.stdout.setEncoding('utf8').on('data', (d: string) => (agentLog += d));
    await until(() => agentLog.includes('agent API listening') || agent.exitCode !== null, 30_000);
    const tunnels = await curl([`http://${listen}/tunnels`]);
    expect(tunnels.status, tunnels.text).toBe(200);
  }, 120_000);
});
