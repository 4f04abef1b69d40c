import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certificateMaker } from './support/certificates.js';
import { startTestResolver, type TestResolver } from './support/dns-resolver.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { startPebble, type Pebble } from './support/pebble.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';
import { curl, CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  type EdgePorts,
} from './support/edge-listeners.js';
import {
  createApiKey,
  E2E_SETTINGS,
  freePort,
  REPO_ROOT,
  startBurrowServer,
  type BurrowServer,
} from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Real certificates from a real ACME CA (Debian's pebble): HTTP-01 through the HTTP ingress,
 * DNS-01 through Burrow's own DNS server reached by the CNAME a user adds, the base domain's
 * wildcard, failures that say what to fix and heal on retry, restarts that do not reorder, a
 * forced renewal under a live connection, and uploaded certificates.
 */

const BASE = E2E_SETTINGS.baseDomain;
/** The name agents dial; the base domain's wildcard certificate covers it. */
const AGENT_HOST = `connect.${BASE}`;

/**
 * Run an @ngrok/ngrok agent in a child process that resolves `AGENT_HOST` to 127.0.0.1 (a private
 * mount namespace with its own /etc/hosts: the agent must dial the name to check the certificate),
 * trusting only `caPem`. Resolves with the URL it serves, or rejects with what it printed.
 */
async function agentByHostname(env: { PORT: string; CA: string; TOKEN: string; TO: string }) {
  const hosts = join(mkdtempSync(join(tmpdir(), 'burrow-hosts-')), 'hosts');
  writeFileSync(hosts, `127.0.0.1 ${AGENT_HOST}\n${readFileSync('/etc/hosts', 'utf8')}`);
  const script = `
    const { default: ngrok } = await import('@ngrok/ngrok');
    const session = await new ngrok.SessionBuilder().serverAddr('${AGENT_HOST}:' + process.env.PORT)
      .caCert(Buffer.from(process.env.CA)).authtoken(process.env.TOKEN).connect();
    const listener = await session.httpEndpoint().listenAndForward(process.env.TO);
    console.log(listener.url());
    setInterval(() => undefined, 60_000);`;
  const child = spawn(
    'unshare',
    [
      '--mount',
      // The agent dies with unshare: killing the child the test holds must not orphan it.
      '--kill-child',
      'sh',
      '-c',
      `mount --bind ${hosts} /etc/hosts && exec "$0" "$@"`,
      process.execPath,
      '--input-type=module',
      '-e',
      script,
    ],
    { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8').once('data', (line: string) => resolve(line.trim()));
    child.once('exit', (code) => reject(new Error(`agent exited ${code}: ${output}`)));
  });
  return { child, url };
}

/** The leaf certificate a TLS handshake for `name` on `port` presents, checked against `ca`. */
async function servedCertificate(port: number, name: string, ca: string) {
  const socket = tls.connect({ host: '127.0.0.1', port, servername: name, ca });
  await once(socket, 'secureConnect');
  const leaf = new X509Certificate(socket.getPeerCertificate().raw);
  socket.destroy();
  return leaf;
}

describe('ACME certificates from pebble', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let dnsPort: number;
  let resolver: TestResolver;
  let pebble: Pebble;
  let pebbleRoot: string;
  let pebbleRootFile: string;
  let web: LocalServer;
  const sessions: ngrok.Session[] = [];
  const maker = certificateMaker();

  const serverArgs = (extra: string[] = []) => [
    ...edgeServerArgs(ports),
    ...['--dns-listen', `127.0.0.1:${dnsPort}`],
    ...['--acme-directory', pebble.directoryUrl, '--acme-ca-cert', pebble.listenerCaFile],
    ...['--acme-retry-min', '1', '--log-level', 'debug'],
    ...['--agent-hostname', AGENT_HOST],
    ...extra,
  ];

  /** The reserved domain once `done` holds for it (polling the API). */
  async function domainWhen(id: string, done: (d: Record<string, unknown>) => boolean) {
    const until = Date.now() + 45_000;
    let last: Record<string, unknown> = {};
    while (Date.now() < until) {
      last = (await api.get(`/reserved_domains/${id}`)).body as Record<string, unknown>;
      if (done(last)) return last;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(
      `reserved domain ${id} never got there: ${JSON.stringify(last)}\n${pebble.output().slice(-2000)}`,
    );
  }
  const issued = (d: Record<string, unknown>) => d.certificate !== null;

  async function agentSession(): Promise<ngrok.Session> {
    const session = await connectNgrok(
      ports,
      readFileSync(join(db.dataDir, 'ca.pem')),
      await createAuthtoken(api),
    );
    sessions.push(session);
    return session;
  }

  /** curl with verification on, trusting only pebble's root. */
  const curlTrusted = (name: string) =>
    curl([
      `https://${name}:${ports.https}/`,
      '--cacert',
      pebbleRootFile,
      '--connect-to',
      `${name}:${ports.https}:127.0.0.1:${ports.https}`,
    ]);

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    ports = await freeEdgePorts();
    dnsPort = await freePort();
    resolver = await startTestResolver({
      delegated: { zone: BASE, address: `127.0.0.1:${dnsPort}` },
      defaultA: '127.0.0.1',
    });
    pebble = await startPebble({ httpPort: ports.http, dnsServer: `127.0.0.1:${resolver.port}` });
    pebbleRoot = await pebble.issuingRootPem();
    pebbleRootFile = join(db.dataDir, 'pebble-root.pem');
    writeFileSync(pebbleRootFile, pebbleRoot);
    server = await startBurrowServer(db, { args: serverArgs() });
    api = new CurlApi(server.url, await createApiKey(db));
    web = await startHttpUpstream((_req, res) => res.end('served with a real certificate'));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await web?.close();
    await server?.stop(20_000);
    await pebble?.close();
    await resolver?.close();
    await db?.drop();
    maker.cleanup();
  });

  it('issues a plain reserved domain by HTTP-01 and serves it to a client that trusts only the CA', async () => {
    const created = await api.post('/reserved_domains', { domain: 'app.example.com' });
    expect(created.status, created.text).toBe(201);
    expect(created.body.certificate_management_status.provisioning_job.msg).toBe(
      'Managed certificate provisioning in progress.',
    );
    const done = await domainWhen(created.body.id as string, issued);
    const status = done.certificate_management_status as Record<string, unknown>;
    expect(status.provisioning_job).toBeNull();
    expect(Date.parse(status.renews_at as string)).toBeGreaterThan(Date.now());
    const ref = done.certificate as { id: string; uri: string };
    expect(ref.id).toMatch(/^cert_/);
    const cert = await api.get(`/tls_certificates/${ref.id}`);
    expect(cert.body).toMatchObject({ managed: true });
    expect(cert.body.subject_alternative_names.dns_names).toEqual(['app.example.com']);
    expect(cert.text).not.toMatch(/PRIVATE KEY/);

    const session = await agentSession();
    await session
      .httpEndpoint()
      .domain('app.example.com')
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    expect(await curlTrusted('app.example.com')).toMatchObject({
      status: 200,
      text: 'served with a real certificate',
    });
  });

  it('issues a wildcard by DNS-01 through the CNAME a user adds to Burrow’s DNS server', async () => {
    const created = await api.post('/reserved_domains', { domain: '*.sitea.example.com' });
    const target = created.body.acme_challenge_cname_target as string;
    expect(target).toMatch(new RegExp(`\\.acme-challenge\\.${BASE.replace('.', '\\.')}$`));
    resolver.setCname('_acme-challenge.sitea.example.com', target);
    await domainWhen(created.body.id as string, issued);
    const session = await agentSession();
    await session
      .httpEndpoint()
      .domain('dev1.sitea.example.com')
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    expect(await curlTrusted('dev1.sitea.example.com')).toMatchObject({ status: 200 });
    const leaf = await servedCertificate(ports.https, 'dev1.sitea.example.com', pebbleRoot);
    expect(leaf.subjectAltName).toBe('DNS:*.sitea.example.com');
  });

  it('serves random names under the base domain with the base wildcard certificate', async () => {
    const session = await agentSession();
    const listener = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${web.port}`);
    const host = new URL(listener.url()!).hostname;
    const until = Date.now() + 45_000;
    let reply = await curlTrusted(host);
    while (reply.status !== 200 && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      reply = await curlTrusted(host);
    }
    expect(reply, pebble.output().slice(-2000)).toMatchObject({ status: 200 });
    const leaf = await servedCertificate(ports.https, host, pebbleRoot);
    expect(leaf.subjectAltName).toBe(`DNS:*.${BASE}`);
  });

  it('lets @ngrok/ngrok that trusts only the CA connect to the agent listener by its hostname', async () => {
    const token = await createAuthtoken(api);
    const agent = await agentByHostname({
      PORT: String(ports.agent),
      CA: pebbleRoot,
      TOKEN: token,
      TO: `http://127.0.0.1:${web.port}`,
    });
    try {
      expect(agent.url).toMatch(new RegExp(`^https://[a-z0-9]+\\.${BASE.replace('.', '\\.')}:`));
      expect(await curlTrusted(new URL(agent.url).hostname)).toMatchObject({ status: 200 });
    } finally {
      agent.child.kill('SIGKILL');
    }
  });

  it('says DNS_ERROR with what to fix and when it retries, then succeeds once DNS is fixed', async () => {
    const created = await api.post('/reserved_domains', { domain: '*.siteb.example.com' });
    const id = created.body.id as string;
    const failed = await domainWhen(id, (d) => {
      const job = (
        d.certificate_management_status as { provisioning_job: Record<string, unknown> | null }
      ).provisioning_job;
      return job?.error_code === 'DNS_ERROR';
    });
    const job = (
      failed.certificate_management_status as { provisioning_job: Record<string, string> }
    ).provisioning_job;
    expect(job.msg).toContain(
      `_acme-challenge.siteb.example.com CNAME ${created.body.acme_challenge_cname_target}`,
    );
    expect(Date.parse(job.retries_at!)).toBeGreaterThan(Date.parse(job.started_at!));
    expect(failed.certificate).toBeNull();
    resolver.setCname(
      '_acme-challenge.siteb.example.com',
      created.body.acme_challenge_cname_target as string,
    );
    await domainWhen(id, issued);
  });

  it('does not order again after a restart and serves the same certificate', async () => {
    const before = await servedCertificate(ports.https, 'app.example.com', pebbleRoot);
    // Agents closed first, so none reconnects and holds app.example.com in the next test.
    await Promise.all(sessions.splice(0).map((s) => s.close().catch(() => undefined)));
    await server.stop(20_000);
    server = await startBurrowServer(db, { args: serverArgs() });
    api = new CurlApi(server.url, api.key);
    const after = await servedCertificate(ports.https, 'app.example.com', pebbleRoot);
    expect(after.serialNumber).toBe(before.serialNumber);
    // A pass has looked everything over by now: nothing was ordered.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(server.logs.filter((l) => l.msg === 'ordering certificate')).toEqual([]);
  });

  it('renews when forced, without dropping a live connection', async () => {
    const before = await servedCertificate(ports.https, 'app.example.com', pebbleRoot);
    // Renewal due a few seconds from now: the fraction of the lifetime that has passed by then.
    const from = Date.parse(before.validFrom);
    const fraction = (Date.now() + 6000 - from) / (Date.parse(before.validTo) - from);
    await server.stop(20_000);
    server = await startBurrowServer(db, {
      args: serverArgs(['--acme-renew-after', fraction.toFixed(12)]),
    });
    api = new CurlApi(server.url, api.key);
    const session = await agentSession();
    await session
      .httpEndpoint()
      .domain('app.example.com')
      .listenAndForward(`http://127.0.0.1:${web.port}`);
    // A keep-alive connection opened before the renewal.
    const live = tls.connect({
      host: '127.0.0.1',
      port: ports.https,
      servername: 'app.example.com',
      ca: pebbleRoot,
    });
    await once(live, 'secureConnect');
    const get = async (): Promise<string> => {
      live.write('GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n');
      let text = '';
      while (!text.includes('served with a real certificate')) {
        const [chunk] = (await once(live, 'data')) as [Buffer];
        text += chunk.toString();
      }
      return text;
    };
    expect(await get()).toMatch(/^HTTP\/1\.1 200/);
    const until = Date.now() + 45_000;
    let now = before;
    while (now.serialNumber === before.serialNumber && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      now = await servedCertificate(ports.https, 'app.example.com', pebbleRoot);
    }
    expect(now.serialNumber).not.toBe(before.serialNumber);
    expect(await get()).toMatch(/^HTTP\/1\.1 200/);
    live.destroy();
  });

  it('serves an uploaded certificate for its domain and never returns its key', async () => {
    const certificatePem = maker.make('/CN=upload.example.com', [
      'subjectAltName=DNS:upload.example.com',
    ]);
    const keyPem = maker.lastKey();
    const uploaded = await api.post('/tls_certificates', {
      certificate_pem: certificatePem,
      private_key_pem: keyPem,
      description: 'uploaded',
    });
    expect(uploaded.status, uploaded.text).toBe(201);
    expect(uploaded.body).toMatchObject({ managed: false, private_key_type: 'ecdsa' });
    const both = await api.post('/reserved_domains', {
      domain: 'upload.example.com',
      certificate_id: uploaded.body.id,
      certificate_management_policy: {},
    });
    expect(both.body).toMatchObject({ error_code: 'ERR_NGROK_434' });
    const domain = await api.post('/reserved_domains', {
      domain: 'upload.example.com',
      certificate_id: uploaded.body.id,
    });
    expect(domain.body.certificate).toMatchObject({ id: uploaded.body.id });
    expect(domain.body.certificate_management_policy).toBeNull();
    const keyBody = keyPem.split('\n')[1]!;
    for (const path of [
      '/tls_certificates',
      `/tls_certificates/${uploaded.body.id}`,
      '/reserved_domains',
    ]) {
      expect((await api.get(path)).text).not.toContain(keyBody);
    }
    expect(server.stdout()).not.toContain(keyBody);
    const leaf = await servedCertificate(ports.https, 'upload.example.com', certificatePem);
    expect(leaf.fingerprint256).toBe(new X509Certificate(certificatePem).fingerprint256);
  });
});
