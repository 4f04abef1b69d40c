import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from './support/stores.js';
import { curl, CurlApi, type CurlReply } from './support/curl.js';
import { edgeServerArgs, ingressCurl } from './support/edge-listeners.js';
import {
  BURROW_BIN,
  createApiKey,
  freePort,
  startBurrowServer,
  type BurrowServer,
  type LogLine,
} from './support/server-process.js';

/**
 * The device agent as docs/device-agent.md tells it, with real processes: `burrow server` (API and
 * edge), the walkthrough's setup through the API with curl (a wildcard reserved domain, a bot
 * user, an authtoken owned by it with the ACL `bind:*.sitea.<domain>`), then `burrow agent`
 * started in a folder holding the sample's test.json, driven with curl, killed and started again,
 * and left running while the server restarts. Public clients are curl against the edge's HTTPS
 * port with the server's CA. Run `npm run build` first.
 */

const SITE = 'sitea.burrow.test';

/** The sample's test.json (docs/device-agent.md, step 6): add a header to every response. */
const TEST_JSON = {
  inbound: [],
  outbound: [
    {
      expressions: [],
      name: 'Add headers to requests',
      actions: [{ type: 'add-headers', config: { headers: { 'is-ngrok': '0000000000' } } }],
    },
  ],
};

const OWN_POLICY = {
  inbound: [],
  outbound: [
    {
      name: 'tag device2',
      actions: [{ type: 'add-headers', config: { headers: { 'x-device': 'two' } } }],
    },
  ],
};

interface AgentProcess {
  child: ChildProcessWithoutNullStreams;
  logs: LogLine[];
  stderr(): string;
  exit: Promise<number | null>;
}

function spawnAgent(cwd: string, args: string[], env: NodeJS.ProcessEnv): AgentProcess {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BURROW_')) clean[k] = v;
  const child = spawn(process.execPath, [BURROW_BIN, 'agent', ...args], {
    cwd,
    env: { ...clean, ...env },
  });
  const logs: LogLine[] = [];
  let pending = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        // Only JSON log lines matter.
      }
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return { child, logs, stderr: () => stderr, exit };
}

describe.each(DATABASE_KINDS)('burrow agent, the docs/device-agent.md walkthrough (%s)', (kind) => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: { agent: number; http: number; https: number; local: number };
  let caFile: string;
  let home: string;
  let authtoken: string;
  let web: LocalServer;
  let agent: AgentProcess;
  const spawned: AgentProcess[] = [];

  const startServer = async (): Promise<BurrowServer> => {
    const s = await startBurrowServer(db, {
      args: edgeServerArgs(ports),
    });
    api = new CurlApi(s.url, api?.key ?? (await createApiKey(db)));
    return s;
  };

  /** Start the agent in `home` with its defaults (tunnels.json, test.json) and wait for the API. */
  const startAgentProcess = async (
    cwd = home,
    listen = ports.local,
    extra: string[] = [],
  ): Promise<AgentProcess> => {
    const run = spawnAgent(
      cwd,
      [
        ...['--server', `127.0.0.1:${ports.agent}`, '--ca', caFile],
        ...['--listen', `127.0.0.1:${listen}`],
        ...extra,
      ],
      { BURROW_AUTHTOKEN: authtoken },
    );
    spawned.push(run);
    // Ready means the local API listens and the session is up: on a loaded machine the API can
    // answer before the agent has reached the server, and a create would then get a 503.
    await until(
      () =>
        (run.logs.some((l) => l.msg === 'agent API listening') &&
          run.logs.some((l) => l.msg === 'connected to the server')) ||
        run.child.exitCode !== null,
      30_000,
    );
    if (run.child.exitCode !== null) throw new Error(`the agent exited: ${run.stderr()}`);
    return run;
  };

  const local = (method: string, path: string, body?: unknown, port = ports.local) => {
    const args = ['-X', method, `http://127.0.0.1:${port}${path}`];
    if (body !== undefined) {
      args.push('-H', 'Content-Type: application/json', '-d', JSON.stringify(body));
    }
    return curl(args);
  };

  const curlUrl = ingressCurl(
    () => ports,
    () => caFile,
  );
  /** curl a public https URL at the edge's HTTPS port, trusting the server's CA. */
  const visit = (url: string, path = '/', extra: string[] = []): Promise<CurlReply> =>
    curlUrl(url, path, ['--max-time', '5', ...extra]);
  const urlOf = (name: string): string => `https://${name}:${ports.https}`;
  const eventually = async (url: string, path: string, status: number): Promise<CurlReply> => {
    let last: CurlReply | undefined;
    const deadline = Date.now() + 25_000;
    while (Date.now() < deadline) {
      last = await visit(url, path).catch(() => undefined);
      if (last?.status === status) return last;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(
      `${url}${path} did not answer ${status} in time: ${last?.status} ${last?.text}`,
    );
  };

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    ports = {
      agent: await freePort(),
      http: await freePort(),
      https: await freePort(),
      local: await freePort(),
    };
    caFile = join(db.dataDir, 'ca.pem');
    server = await startServer();
    home = mkdtempSync(join(tmpdir(), 'burrow-device-'));
    writeFileSync(join(home, 'test.json'), JSON.stringify(TEST_JSON));
    web = await startHttpUpstream((req, res) => res.end(`device says ${req.url}`));

    const domain = await api.post('/reserved_domains', { domain: `*.${SITE}`, region: '' });
    expect(domain.status, domain.text).toBe(201);
    const bot = await api.post('/bot_users', { name: 'sitea-agent' });
    expect(bot.status, bot.text).toBe(201);
    expect(bot.body).toMatchObject({ id: expect.stringMatching(/^bot_/) as string, active: true });
    const credential = await api.post('/credentials', {
      description: 'device agent sitea',
      owner_id: bot.body.id,
      acl: [`bind:*.${SITE}`],
    });
    expect(credential.status, credential.text).toBe(201);
    authtoken = credential.body.token as string;
  }, 90_000);

  afterAll(async () => {
    for (const run of spawned) if (run.child.exitCode === null) run.child.kill('SIGKILL');
    await web?.close();
    await server?.stop();
    await db?.drop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('creates a tunnel with the default test.json policy: reachable, header added, policy null', async () => {
    agent = await startAgentProcess();
    expect(await local('GET', '/tunnels')).toMatchObject({ status: 200, body: [] });
    const created = await local('POST', '/tunnels', {
      protocol: 'http',
      forwards_to: `:${web.port}`,
      domain: `device1.${SITE}`,
    });
    expect(created.body).toEqual({
      url: urlOf(`device1.${SITE}`),
      url_part: `device1.${SITE}`,
      protocol: 'http',
      forwards_to: `:${web.port}`,
      domain: `device1.${SITE}`,
      policy: null,
    });
    expect(created.status).toBe(200);
    const reply = await visit(urlOf(`device1.${SITE}`), '/status');
    expect(reply).toMatchObject({ status: 200, text: 'device says /status' });
    expect(reply.headers['is-ngrok']).toBe('0000000000');
    const listed = await local('GET', '/tunnels');
    expect(listed.body).toHaveLength(1);
    expect(typeof listed.body[0].policy).toBe('string');
    expect(JSON.parse(listed.body[0].policy as string)).toEqual(TEST_JSON);
  });

  it('uses a tunnel’s own policy instead of the default one', async () => {
    const created = await local('POST', '/tunnels', {
      protocol: 'http',
      forwards_to: `localhost:${web.port}`,
      domain: `device2.${SITE}`,
      policy: OWN_POLICY,
    });
    expect(created).toMatchObject({ status: 200, body: { policy: OWN_POLICY } });
    const reply = await visit(urlOf(`device2.${SITE}`), '/own');
    expect(reply).toMatchObject({ status: 200, text: 'device says /own' });
    expect(reply.headers['x-device']).toBe('two');
    expect(reply.headers['is-ngrok']).toBeUndefined();
    const listed = (await local('GET', '/tunnels')).body as Array<{
      domain: string;
      policy: string;
    }>;
    const device2 = listed.find((t) => t.domain === `device2.${SITE}`)!;
    expect(JSON.parse(device2.policy)).toEqual(OWN_POLICY);
  });

  it('refuses bad input with a 400 and a domain outside the ACL with the server’s error', async () => {
    const badPort = await local('POST', '/tunnels', {
      forwards_to: 'localhost:99999',
      domain: `x.${SITE}`,
    });
    expect(badPort).toMatchObject({
      status: 400,
      body: { field: 'forwards_to', code: 'ERR_NGROK_215' },
    });
    const badPolicy = await local('POST', '/tunnels', {
      forwards_to: ':1',
      domain: `x.${SITE}`,
      policy: { inbound: [{ actions: [{ type: 'teleport' }] }] },
    });
    expect(badPolicy).toMatchObject({
      status: 400,
      body: { field: 'policy', code: 'ERR_NGROK_2201' },
    });
    const outside = await local('POST', '/tunnels', {
      forwards_to: `:${web.port}`,
      domain: 'device1.siteb.burrow.test',
    });
    expect(outside).toMatchObject({
      status: 403,
      body: { code: 'ERR_NGROK_316', field: 'domain' },
    });
    expect(outside.body.error).toMatch(/ACL/);
    const duplicate = await local('POST', '/tunnels', {
      forwards_to: ':1',
      domain: `device1.${SITE}`,
    });
    expect(duplicate.status).toBe(409);
    expect((await local('GET', '/tunnels')).body).toHaveLength(2);
  });

  it('comes back with every tunnel on the same URL after SIGKILL', async () => {
    const before = (await local('GET', '/tunnels')).body as unknown[];
    agent.child.kill('SIGKILL');
    await agent.exit;
    agent = await startAgentProcess();
    expect((await local('GET', '/tunnels')).body).toEqual(before);
    const one = await eventually(urlOf(`device1.${SITE}`), '/again', 200);
    expect(one.text).toBe('device says /again');
    expect(one.headers['is-ngrok']).toBe('0000000000');
    const two = await eventually(urlOf(`device2.${SITE}`), '/again', 200);
    expect(two.headers['x-device']).toBe('two');
  });

  it('DELETE closes the public URL (then 404) and forgets the tunnel', async () => {
    const deleted = await local('DELETE', `/tunnels/device2.${SITE}`);
    expect(deleted).toMatchObject({ status: 204, text: '' });
    expect((await visit(urlOf(`device2.${SITE}`), '/gone')).status).toBe(404);
    expect(
      ((await local('GET', '/tunnels')).body as Array<{ domain: string }>).map((t) => t.domain),
    ).toEqual([`device1.${SITE}`]);
    const state = JSON.parse(readFileSync(join(home, 'tunnels.json'), 'utf8')) as {
      tunnels: Array<{ domain: string }>;
    };
    expect(state.tunnels.map((t) => t.domain)).toEqual([`device1.${SITE}`]);
    expect((await local('DELETE', `/tunnels/device2.${SITE}`)).status).toBe(404);
  });

  it('applies endpoint options (basic_auth, request_header) before the policy, shown without secrets, kept across a restart', async () => {
    const echo = await startHttpUpstream((req, res) =>
      res.end(`env=${String(req.headers['x-env'])} secret=${String(req.headers['x-secret'])}`),
    );
    try {
      const domain = `device4.${SITE}`;
      const body = {
        forwards_to: `:${echo.port}`,
        domain,
        basic_auth: ['ops:correct-horse'],
        request_header: { add: ['x-env:dev'], remove: ['x-secret'] },
        policy: OWN_POLICY,
      };
      const shortPassword = await local('POST', '/tunnels', {
        ...body,
        basic_auth: ['ops:short'],
      });
      expect(shortPassword).toMatchObject({
        status: 400,
        body: { code: 'ERR_NGROK_215', field: 'basic_auth[0]' },
      });
      expect(shortPassword.body.error).toMatch(
        /^basic_auth\[0\]: the password of user "ops" must have 8 to 128 characters/,
      );
      const unknown = await local('POST', '/tunnels', { ...body, basic_auth_typo: [] });
      expect(unknown).toMatchObject({
        status: 400,
        body: { code: 'ERR_NGROK_214', field: 'basic_auth_typo' },
      });

      const created = await local('POST', '/tunnels', body);
      expect(created.status, created.text).toBe(200);
      expect(created.body).toMatchObject({
        url: urlOf(domain),
        policy: OWN_POLICY,
        basic_auth: ['ops:[redacted]'],
        request_header: { add: ['x-env:dev'], remove: ['x-secret'] },
      });
      expect(created.text).not.toContain('correct-horse');

      const check = async () => {
        const anonymous = await visit(urlOf(domain), '/');
        expect(anonymous.status).toBe(401);
        expect(anonymous.headers['www-authenticate']).toMatch(/^Basic realm=/);
        const wrong = await visit(urlOf(domain), '/', ['-u', 'ops:wrong-horse']);
        expect(wrong.status).toBe(401);
        const ok = await visit(urlOf(domain), '/', [
          ...['-u', 'ops:correct-horse', '-H', 'x-secret: from-client'],
        ]);
        expect(ok).toMatchObject({ status: 200, text: 'env=dev secret=undefined' });
        // The tunnel's own policy runs after the options' rules.
        expect(ok.headers['x-device']).toBe('two');
      };
      await check();

      const listed = (await local('GET', '/tunnels')).body as Array<Record<string, unknown>>;
      const mine = listed.find((t) => t.domain === domain)!;
      expect(mine).toMatchObject({
        basic_auth: ['ops:[redacted]'],
        request_header: { add: ['x-env:dev'], remove: ['x-secret'] },
      });
      expect(JSON.parse(mine.policy as string)).toEqual(OWN_POLICY);
      expect(JSON.stringify(listed)).not.toContain('correct-horse');
      // The state file keeps the password (to bind again at start), readable by its owner only.
      const statePath = join(home, 'tunnels.json');
      expect(readFileSync(statePath, 'utf8')).toContain('ops:correct-horse');
      if (process.platform !== 'win32') expect(statSync(statePath).mode & 0o777).toBe(0o600);

      agent.child.kill('SIGKILL');
      await agent.exit;
      agent = await startAgentProcess();
      await eventually(urlOf(domain), '/', 401);
      await check();

      expect((await local('DELETE', `/tunnels/${domain}`)).status).toBe(204);
    } finally {
      await echo.close();
    }
  });

  it('keeps running while the server is down and restores the tunnels when it is back', async () => {
    await server.stop();
    await until(
      () => agent.logs.some((l) => l.msg === 'lost the connection to the server; reconnecting'),
      10_000,
    );
    expect(agent.child.exitCode).toBeNull();
    expect((await local('GET', '/tunnels')).body).toHaveLength(1);
    const meanwhile = await local('POST', '/tunnels', {
      forwards_to: ':1',
      domain: `device3.${SITE}`,
    });
    expect(meanwhile.status).toBe(503);
    server = await startServer();
    const back = await eventually(urlOf(`device1.${SITE}`), '/back', 200);
    expect(back.text).toBe('device says /back');
    expect(agent.child.exitCode).toBeNull();
  });

  it('refuses to start, naming the file, on a bad default policy or a corrupt state file', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'burrow-device-broken-'));
    try {
      const run = async (args: string[]) => {
        const started = spawnAgent(folder, ['--listen', '127.0.0.1:0', ...args], {
          BURROW_AUTHTOKEN: authtoken,
        });
        return { code: await started.exit, stderr: started.stderr() };
      };
      const named = await run(['--default-policy', 'nope.json']);
      expect(named.code).toBe(2);
      expect(named.stderr).toContain(
        `cannot read the default policy file ${join(folder, 'nope.json')}`,
      );

      writeFileSync(
        join(folder, 'test.json'),
        '{"inbound": [{"actions": [{"type": "teleport"}]}]}',
      );
      const invalid = await run([]);
      expect(invalid.code).toBe(2);
      expect(invalid.stderr).toMatch(
        new RegExp(
          `the default policy file ${join(folder, 'test.json')} is not a valid traffic policy: .*teleport`,
        ),
      );

      writeFileSync(join(folder, 'test.json'), JSON.stringify(TEST_JSON));
      writeFileSync(join(folder, 'tunnels.json'), '{"version": 1, "tunnels": [');
      const corrupt = await run([]);
      expect(corrupt.code).toBe(2);
      expect(corrupt.stderr).toContain(
        `the state file ${join(folder, 'tunnels.json')} is not valid JSON`,
      );
      expect(readFileSync(join(folder, 'tunnels.json'), 'utf8')).toBe(
        '{"version": 1, "tunnels": [',
      );
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('--expose serves the API at the agent domain, only with the bearer token', async () => {
    const refused = spawnAgent(home, ['--expose', `agent.${SITE}`, '--listen', '127.0.0.1:0'], {
      BURROW_AUTHTOKEN: authtoken,
    });
    expect(await refused.exit).toBe(2);
    expect(refused.stderr()).toMatch(
      /^burrow agent: --expose serves the agent API publicly, so it needs --api-token/,
    );

    const exposedHome = mkdtempSync(join(tmpdir(), 'burrow-device-exposed-'));
    try {
      writeFileSync(join(exposedHome, 'test.json'), JSON.stringify(TEST_JSON));
      const port = await freePort();
      const exposed = await startAgentProcess(exposedHome, port, [
        ...['--expose', `agent.${SITE}`, '--api-token', 'k7-device-secret'],
      ]);
      await until(() => exposed.logs.some((l) => l.msg === 'agent API exposed'), 15_000);
      const anonymous = await visit(urlOf(`agent.${SITE}`), '/tunnels');
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers['is-ngrok']).toBe('0000000000');
      const wrong = await visit(urlOf(`agent.${SITE}`), '/tunnels', [
        '-H',
        'Authorization: Bearer nope',
      ]);
      expect(wrong.status).toBe(401);
      const allowed = await visit(urlOf(`agent.${SITE}`), '/tunnels', [
        ...['-H', 'Authorization: Bearer k7-device-secret'],
      ]);
      expect(allowed).toMatchObject({ status: 200, body: [] });
      expect((await local('GET', '/tunnels', undefined, port)).status).toBe(401);
      exposed.child.kill('SIGTERM');
      expect(await exposed.exit).toBe(0);
    } finally {
      rmSync(exposedHome, { recursive: true, force: true });
    }
  });
});
