import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../src/edge/certificates/certificates.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  ingressCurl,
  type EdgePorts,
} from './support/edge-listeners.js';
import {
  runBurrow,
  spawnBurrow,
  startBurrowServer,
  type RunningBurrow,
  type BurrowServer,
  type LogLine,
} from './support/server-process.js';

/**
 * First contact (issue 16): an agent connects without knowing about certificates. A real
 * `burrow server` runs in a folder of its own with the default data folder (`./burrow-data`); the
 * compiled `burrow http` and `burrow agent` run in that folder and elsewhere, trusting the server
 * by the CA found there, by the fingerprint the server prints, or by `burrow config add-ca`.
 * Run `npm run build` first.
 */

function burrow(cwd: string, args: string[], env: NodeJS.ProcessEnv): RunningBurrow {
  return spawnBurrow(args, env, cwd);
}

async function forwarding(run: RunningBurrow): Promise<string> {
  await until(() => /^Forwarding \S+/m.test(run.stdout()) || run.child.exitCode !== null, 15_000);
  const m = /^Forwarding (\S+) -> /m.exec(run.stdout());
  if (!m) throw new Error(`no Forwarding line: ${run.stdout()} ${run.stderr()}`);
  return m[1]!;
}

describe('first contact: agents that were told nothing about certificates', () => {
  let work: string;
  let elsewhere: string;
  let ports: EdgePorts;
  let server: BurrowServer;
  let web: LocalServer;
  let token: string;
  let caFile: string;
  let fingerprint: string;
  let serverAddr: string;
  let noConfig: NodeJS.ProcessEnv;
  const curlUrl = ingressCurl(
    () => ports,
    () => caFile,
  );

  /** `burrow http` for `web`, run in `cwd` with `args` added, up to its Forwarding line; then a request through it. */
  async function serveThrough(cwd: string, args: string[], env = noConfig): Promise<RunningBurrow> {
    const run = burrow(
      cwd,
      ['http', String(web.port), '--server', serverAddr, '--authtoken', token, ...args],
      env,
    );
    const url = await forwarding(run);
    const reply = await curlUrl(url, '/first-contact');
    expect(reply).toMatchObject({ status: 200, text: 'hello from /first-contact' });
    run.child.kill('SIGINT');
    expect(await run.exit).toBe(0);
    return run;
  }

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'burrow-first-contact-server-'));
    elsewhere = mkdtempSync(join(tmpdir(), 'burrow-first-contact-elsewhere-'));
    noConfig = { XDG_CONFIG_HOME: join(elsewhere, 'no-config') };
    ports = await freeEdgePorts();
    serverAddr = `127.0.0.1:${ports.agent}`;
    // `--data-dir ./burrow-data` is the default, spelled out because the helper always passes one.
    server = await startBurrowServer(
      { dataDir: './burrow-data', database: '' },
      { cwd: work, args: edgeServerArgs(ports) },
    );
    caFile = join(work, 'burrow-data', 'ca.pem');
    const key = await runBurrow(['api-key', 'create'], 20_000, { cwd: work });
    expect(key.code, key.stderr).toBe(0);
    token = await createAuthtoken(new CurlApi(server.url, key.stdout.trim()), {
      description: 'first contact',
    });
    web = await startHttpUpstream((req, res) => res.end(`hello from ${req.url}`));
    await until(() => server.stderr().includes('On another machine:'), 10_000);
    fingerprint = /--ca-fingerprint (sha256:\S+)/.exec(server.stderr())?.[1] ?? '';
  });
  afterAll(async () => {
    await web?.close();
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
    rmSync(elsewhere, { recursive: true, force: true });
  });

  it('burrow server prints the agent commands with the SHA-256 fingerprint of its CA', () => {
    const real = new X509Certificate(readFileSync(caFile)).fingerprint256;
    expect(fingerprint).toBe(`sha256:${real}`);
    const stderr = server.stderr();
    expect(stderr).toContain(
      `On this machine, in this folder: burrow http 3000 --server ${serverAddr} --authtoken <token>\n`,
    );
    expect(stderr).toContain(
      `On another machine: burrow http 3000 --server ${serverAddr} --authtoken <token> --ca-fingerprint sha256:${real}\n`,
    );
    expect(stderr).toContain('POST /credentials');
    const log = server.logs.find((l: LogLine) => l.msg === 'agents connect with');
    expect(log).toMatchObject({ agents: serverAddr, ca_fingerprint: `sha256:${real}` });
  });

  it('in the server folder, burrow http trusts ./burrow-data/ca.pem by itself and says so', async () => {
    const run = await serveThrough(work, []);
    expect(run.stderr()).toMatch(
      /^burrow: trusting the CA of the server in this folder, \.\/burrow-data\/ca\.pem \(--ca <file> to use another\)$/m,
    );
  });

  it('elsewhere, without a CA, it fails naming --ca, --ca-fingerprint and config add-ca', async () => {
    const run = burrow(
      elsewhere,
      ['http', String(web.port), '--server', serverAddr, '--authtoken', token],
      noConfig,
    );
    expect(await run.exit).toBe(1);
    const lines = run.stderr().trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(
      `burrow: failed to connect to ${serverAddr}: its certificate is not trusted here ` +
        `(self-signed certificate in certificate chain, SELF_SIGNED_CERT_IN_CHAIN): it comes from ` +
        `"${new X509Certificate(readFileSync(caFile)).subject.match(/CN=(.*)/)![1]}" ${fingerprint}`,
    );
    expect(lines[1]).toMatch(/--ca <file>/);
    expect(lines[1]).toMatch(/--ca-fingerprint <sha256>/);
    expect(lines[1]).toMatch(/`burrow config add-ca <file\|url>`/);
  });

  it('elsewhere, with the fingerprint burrow server printed, it connects and serves', async () => {
    const run = await serveThrough(elsewhere, ['--ca-fingerprint', fingerprint]);
    expect(run.stderr()).not.toMatch(/trusting the CA/);
    // Pasted as openssl prints it, colons dropped, lower case: the same pin.
    const bare = fingerprint.slice('sha256:'.length).replace(/:/g, '').toLowerCase();
    await serveThrough(elsewhere, [], { ...noConfig, BURROW_CA_FINGERPRINT: bare });
  });

  it('with a wrong fingerprint it refuses, exits 1 and never sends the authtoken', async () => {
    const wrong = `sha256:${'AB:'.repeat(31)}AB`;
    const refused = burrow(
      elsewhere,
      [
        'http',
        String(web.port),
        '--server',
        serverAddr,
        '--authtoken',
        token,
        '--ca-fingerprint',
        wrong,
      ],
      noConfig,
    );
    expect(await refused.exit).toBe(1);
    expect(refused.stderr()).toMatch(
      new RegExp(
        `^burrow: failed to connect to ${serverAddr}: no certificate it presents has the fingerprint of --ca-fingerprint <sha256> \\(${wrong}\\); it presents .*${fingerprint}.*Nothing was sent to it$`,
        'm',
      ),
    );
    expect(refused.stderr()).toMatch(
      /^Compare --ca-fingerprint <sha256> with what `burrow server` printed/m,
    );

    // What reaches a listener with this server's very chain: nothing with the wrong pin, the
    // authtoken with the right one (so the count below would have seen it).
    const ca = await LocalCa.loadOrCreate(join(work, 'burrow-data'));
    const leaf = await ca.issue(['127.0.0.1']);
    let received = '';
    const fake = tls.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (s) => {
      s.setEncoding('latin1').on('data', (d: string) => (received += d));
      s.on('error', () => undefined);
    });
    fake.listen(0, '127.0.0.1');
    await once(fake, 'listening');
    const fakeAddr = `127.0.0.1:${(fake.address() as AddressInfo).port}`;
    try {
      const args = ['http', '3000', '--server', fakeAddr, '--authtoken', token, '--ca-fingerprint'];
      const wrongPin = burrow(elsewhere, [...args, wrong], noConfig);
      expect(await wrongPin.exit).toBe(1);
      expect(received).toBe('');
      const rightPin = burrow(elsewhere, [...args, fingerprint], noConfig);
      await until(() => received.includes(token), 10_000);
      rightPin.child.kill('SIGKILL');
      await rightPin.exit;
    } finally {
      fake.close();
    }
  });

  it('burrow config add-ca (a file, or a URL checked by fingerprint) makes tunnels elsewhere work', async () => {
    const env = { XDG_CONFIG_HOME: join(elsewhere, 'cfg') };
    const added = await runBurrow(['config', 'add-ca', caFile], 20_000, { cwd: elsewhere, env });
    expect(added.code, added.stderr).toBe(0);
    const file = join(elsewhere, 'cfg', 'burrow', 'config.yaml');
    expect(added.stdout).toMatch(new RegExp(`^Added CA ".*" ${fingerprint} \\(${file}\\)$`, 'm'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = parseYaml(readFileSync(file, 'utf8')) as { ca_certs: string[] };
    expect(stored.ca_certs).toEqual([readFileSync(caFile, 'utf8').trim() + '\n']);
    const again = await runBurrow(['config', 'add-ca', caFile], 20_000, { cwd: elsewhere, env });
    expect(again.stdout).toMatch(/^Already trusted: CA /m);
    await serveThrough(elsewhere, [], env);

    // From a URL (here a plain-HTTP one): refused with a wrong fingerprint, stored with the right one.
    const pem = readFileSync(caFile, 'utf8');
    const site = createHttpServer((_req, res) => res.end(pem));
    site.listen(0, '127.0.0.1');
    await once(site, 'listening');
    const url = `http://127.0.0.1:${(site.address() as AddressInfo).port}/ca.pem`;
    const urlEnv = { XDG_CONFIG_HOME: join(elsewhere, 'cfg-url') };
    try {
      const wrong = await runBurrow(
        ['config', 'add-ca', url, '--ca-fingerprint', `sha256:${'00'.repeat(32)}`],
        20_000,
        { cwd: elsewhere, env: urlEnv },
      );
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/not the certificate sha256:00:00:.*nothing was stored/);
      const right = await runBurrow(
        ['config', 'add-ca', url, '--ca-fingerprint', fingerprint],
        20_000,
        {
          cwd: elsewhere,
          env: urlEnv,
        },
      );
      expect(right.code, right.stderr).toBe(0);
      expect(right.stdout).toMatch(/^Added CA /m);
    } finally {
      site.close();
    }
    await serveThrough(elsewhere, [], urlEnv);
  });

  it('burrow agent trusts the CA in its folder, or the printed fingerprint elsewhere', async () => {
    for (const [cwd, extra] of [
      [work, []],
      [elsewhere, ['--ca-fingerprint', fingerprint]],
    ] as const) {
      const agent = burrow(
        cwd,
        [
          'agent',
          '--server',
          serverAddr,
          '--authtoken',
          token,
          '--listen',
          '127.0.0.1:0',
          '--state',
          join(elsewhere, `state-${cwd === work ? 'a' : 'b'}.json`),
          ...extra,
        ],
        noConfig,
      );
      await until(
        () =>
          agent.stdout().includes('"msg":"connected to the server"') ||
          agent.child.exitCode !== null,
        15_000,
      );
      expect(agent.stdout(), agent.stderr()).toContain('"msg":"connected to the server"');
      expect(agent.stderr().includes('trusting the CA of the server in this folder')).toBe(
        cwd === work,
      );
      agent.child.kill('SIGTERM');
      expect(await agent.exit).toBe(0);
    }
  });
});
