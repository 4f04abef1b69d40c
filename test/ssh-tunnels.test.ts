import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, startTcpUpstream, type LocalServer } from './support/ingress.js';
import { until } from './support/mux.js';
import { ingressCurl, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { databaseArgs, freePort, runBurrow } from './support/server-process.js';
import { certificateMaker } from './support/certificates.js';
import { sshKeygen } from './support/ssh.js';
import { startTlsServer, type TestTlsServer } from './support/tls.js';

/**
 * SSH tunnels as a user runs them: Debian's OpenSSH client (`ssh -R`, batch mode, keys made by
 * ssh-keygen here) against a real `burrow server --ssh-listen`, curl as the public client.
 */

/** A running `ssh`, with what it printed so far. */
interface SshRun {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exit: Promise<number | null>;
}

describe('SSH tunnels with the OpenSSH client', () => {
  let edge: EdgeServer;
  let sshPort: number;
  let keys: string;
  let web: LocalServer;
  let echo: LocalServer;
  let local: TestTlsServer;
  const certificates = certificateMaker();
  const runs: SshRun[] = [];
  const publicGet = (url: string, path = '/', extra: string[] = []) =>
    ingressCurl(
      () => edge.ports,
      () => edge.caFile,
    )(url, path, extra);

  /** A new key pair of `type` (and `bits`) in the test's folder; returns its private key path. */
  const keygen = (name: string, type: string, bits?: number): string =>
    sshKeygen(keys, name, type, bits).path;

  /** POST /ssh_credentials with the public key of `path`; the reply. */
  async function addKey(path: string, body: object = {}) {
    return edge.api.post('/ssh_credentials', {
      public_key: readFileSync(`${path}.pub`, 'utf8'),
      ...body,
    });
  }

  /** `ssh -R <forward> … 127.0.0.1 <command…>` in batch mode with key `key`. */
  function ssh(key: string, forward: string, command: string[], extra: string[] = []): SshRun {
    const child = spawn(
      'ssh',
      [
        ...['-p', String(sshPort), '-i', key, '-R', forward],
        ...['-o', 'BatchMode=yes', '-o', 'IdentitiesOnly=yes', '-o', 'LogLevel=error'],
        ...['-o', 'StrictHostKeyChecking=no', '-o', `UserKnownHostsFile=${join(keys, 'known')}`],
        ...['-o', 'ExitOnForwardFailure=yes'],
        ...extra,
        '127.0.0.1',
        ...command,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exit = once(child, 'exit').then(([code]) => code as number | null);
    const run = { child, stdout: () => out, stderr: () => err, exit };
    runs.push(run);
    return run;
  }

  /** Resolves once the API lists no endpoint at `url`; throws after 5 s. */
  async function endpointGone(url: string): Promise<void> {
    const deadline = Date.now() + 5000;
    for (;;) {
      const listed = (await edge.api.get('/endpoints')).body.endpoints as Array<{ url: string }>;
      if (!listed.some((e) => e.url === url)) return;
      if (Date.now() > deadline) throw new Error(`${url} still listed`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async function forwardingUrl(run: SshRun): Promise<string> {
    await until(() => /Forwarding \S+/.test(run.stdout()) || run.child.exitCode !== null, 15_000);
    const m = /Forwarding (\S+)/.exec(run.stdout());
    if (!m) throw new Error(`no Forwarding line: ${run.stdout()} ${run.stderr()}`);
    return m[1]!;
  }

  beforeAll(async () => {
    sshPort = await freePort();
    edge = await startEdgeServer('sqlite', ['--ssh-listen', `127.0.0.1:${sshPort}`]);
    keys = mkdtempSync(join(tmpdir(), 'burrow-ssh-keys-'));
    web = await startHttpUpstream((req, res) => res.end(`hello from ${req.url}`));
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
    const cert = certificates.make('/CN=service behind ssh', []);
    local = await startTlsServer({ cert, key: certificates.lastKey() });
  });
  afterAll(async () => {
    for (const run of runs) run.child.kill('SIGKILL');
    await web.close();
    await echo.close();
    await local.close();
    certificates.cleanup();
    await edge.server.stop();
    await edge.db.drop();
    rmSync(keys, { recursive: true, force: true });
  });

  it('logs the host key fingerprint that ssh-keygen computes from the key in the data folder', () => {
    const line = edge.server.logs.find((l) => l.msg === 'SSH listener ready');
    const keygenFingerprint = spawnSync('ssh-keygen', [
      '-lf',
      join(edge.db.dataDir, 'ssh_host_ed25519_key'),
    ]).stdout.toString();
    expect(line?.fingerprint).toMatch(/^SHA256:/);
    expect(keygenFingerprint).toContain(String(line?.fingerprint));
  });

  it('accepts ed25519, ECDSA and RSA >= 2048 keys and refuses RSA 1024 with a clear error', async () => {
    for (const [name, type, bits] of [
      ['ed', 'ed25519', undefined],
      ['ec', 'ecdsa', 384],
      ['rsa2048', 'rsa', 2048],
    ] as const) {
      const res = await addKey(keygen(name, type, bits));
      expect(res.status, res.text).toBe(201);
      expect(res.body.fingerprint).toMatch(/^SHA256:/);
    }
    const weak = await addKey(keygen('rsa1024', 'rsa', 1024));
    expect(weak.status).toBe(400);
    expect(weak.body).toMatchObject({ error_code: 'ERR_BURROW_SSH_KEY_INVALID' });
    expect(weak.body.msg).toMatch(/public_key: an RSA key of 1024 bits is too weak/);
    const again = await addKey(join(keys, 'ed'));
    expect(again.status).toBe(409);
  });

  it('http: prints the URL, serves it with --basic-auth enforced, logs requests, and is gone when ssh ends', async () => {
    const run = ssh(join(keys, 'ec'), `0:localhost:${web.port}`, [
      'http',
      '--basic-auth',
      'ops:correct-horse',
    ]);
    const url = await forwardingUrl(run);
    expect(url).toMatch(/^https:\/\/[a-z0-9]{10}\.burrow\.test:\d+$/);
    expect((await publicGet(url, '/hi')).status).toBe(401);
    const reply = await publicGet(url, '/hi', ['-u', 'ops:correct-horse']);
    expect(reply).toMatchObject({ status: 200, text: 'hello from /hi' });
    await until(() => /GET\s+\/hi 200 \d+ms/.test(run.stdout()), 5000);
    const endpoints = await edge.api.get('/endpoints');
    const listed = (endpoints.body.endpoints as Array<{ url: string; metadata: string }>).find(
      (e) => e.url === url,
    );
    // Listed like any endpoint, without the command's secrets.
    expect(listed?.metadata).toBe('ssh http');
    run.child.kill('SIGTERM');
    await run.exit;
    await endpointGone(url);
    const after = await publicGet(url, '/hi', ['-u', 'ops:correct-horse']);
    expect(after.status).toBe(404);
  });

  it('http without options: requests the lean relay carries are logged on the terminal too', async () => {
    const run = ssh(join(keys, 'ec'), `0:localhost:${web.port}`, ['http']);
    const url = await forwardingUrl(run);
    const reply = await publicGet(url, '/plain');
    expect(reply).toMatchObject({ status: 200 });
    await until(() => /GET\s+\/plain 200 \d+ms/.test(run.stdout()), 5000);
    run.child.kill('SIGTERM');
    await run.exit;
  });

  it('tcp: a public port that reaches the service', async () => {
    const run = ssh(join(keys, 'rsa2048'), `0:localhost:${echo.port}`, ['tcp']);
    const url = await forwardingUrl(run);
    const port = Number(/^tcp:\/\/[^:]+:(\d+)$/.exec(url)?.[1]);
    const socket = net.connect(port, '127.0.0.1');
    socket.end('ping over ssh');
    let got = '';
    socket.setEncoding('utf8').on('data', (d: string) => (got += d));
    await once(socket, 'close');
    expect(got).toBe('ping over ssh');
    run.child.kill('SIGTERM');
    await run.exit;
  });

  it('tls: the TLS connection is passed through to the service behind ssh', async () => {
    const run = ssh(join(keys, 'ed'), `0:localhost:${local.port}`, ['tls']);
    const url = await forwardingUrl(run);
    const host = /^tls:\/\/([^:]+):\d+$/.exec(url)?.[1];
    expect(host).toMatch(/\.burrow\.test$/);
    const socket = tls.connect({
      host: '127.0.0.1',
      port: edge.ports.https,
      servername: host,
      rejectUnauthorized: false,
    });
    await once(socket, 'secureConnect');
    // The certificate is the local service's: TLS ends there, not at the edge.
    expect(socket.getPeerCertificate().subject.CN).toBe('service behind ssh');
    let got = '';
    socket.setEncoding('utf8').on('data', (d: string) => (got += d));
    await once(socket, 'close');
    expect(got).toBe('ok');
    run.child.kill('SIGTERM');
    await run.exit;
  });

  it('serves the name given as the bind address of -R', async () => {
    const run = ssh(join(keys, 'ed'), `named.burrow.test:80:localhost:${web.port}`, ['http']);
    const url = await forwardingUrl(run);
    expect(new URL(url).hostname).toBe('named.burrow.test');
    expect(await publicGet(url, '/n')).toMatchObject({ status: 200, text: 'hello from /n' });
    run.child.kill('SIGTERM');
    await run.exit;
  });

  it('pools two SSH sessions on one name with --pooling-enabled; without it the name is taken', async () => {
    const other = await startHttpUpstream((req, res) => res.end(`other from ${req.url}`));
    const pooled = ['http', '--url', 'pool.burrow.test', '--pooling-enabled'];
    const a = ssh(join(keys, 'ed'), `0:localhost:${web.port}`, pooled);
    const b = ssh(join(keys, 'ed'), `0:localhost:${other.port}`, pooled);
    const url = await forwardingUrl(a);
    expect(await forwardingUrl(b)).toBe(url);
    const answers = new Set<string>();
    for (let i = 0; i < 6; i++) answers.add((await publicGet(url, '/p')).text);
    expect(answers).toEqual(new Set(['hello from /p', 'other from /p']));
    const alone = ssh(join(keys, 'ed'), `0:localhost:${web.port}`, [
      'http',
      '--url',
      'pool.burrow.test',
    ]);
    expect(await alone.exit).toBe(1);
    expect(alone.stderr()).toMatch(/already online[\s\S]*ERR_NGROK_334/);
    for (const run of [a, b]) run.child.kill('SIGTERM');
    await Promise.all([a.exit, b.exit]);
    await other.close();
  });

  it('refuses local forwarding (-L) with a message, and the tunnel goes on', async () => {
    const localPort = await freePort();
    const run = ssh(
      join(keys, 'ed'),
      `0:localhost:${web.port}`,
      ['http'],
      ['-L', `${localPort}:127.0.0.1:${edge.ports.http}`],
    );
    const url = await forwardingUrl(run);
    const socket = net.connect(localPort, '127.0.0.1');
    socket.on('error', () => undefined);
    await once(socket, 'close');
    await until(() => /Local forwarding \(-L [^)]+\) is not available/.test(run.stderr()), 5000);
    expect((await publicGet(url, '/still')).status).toBe(200);
    run.child.kill('SIGTERM');
    await run.exit;
  });

  it('burrow ssh-key add registers a key in the store that then opens tunnels', async () => {
    const key = keygen('cli', 'ed25519');
    const added = await runBurrow([
      ...['ssh-key', 'add', `${key}.pub`, '--acl', 'bind:*.burrow.test'],
      ...databaseArgs(edge.db),
    ]);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(/^sshcr_\S+ SHA256:\S+\n$/);
    const run = ssh(key, `0:localhost:${web.port}`, ['http']);
    expect(await publicGet(await forwardingUrl(run), '/cli')).toMatchObject({ status: 200 });
    run.child.kill('SIGTERM');
    await run.exit;
    const weak = await runBurrow([
      'ssh-key',
      'add',
      join(keys, 'rsa1024.pub'),
      ...databaseArgs(edge.db),
    ]);
    expect(weak.code).not.toBe(0);
    expect(weak.stderr).toMatch(/RSA key of 1024 bits is too weak/);
  });

  it('refuses an unknown key, a shell, another command and a name the ACL does not allow, each with a message', async () => {
    const stranger = ssh(keygen('stranger', 'ed25519'), `0:localhost:${web.port}`, ['http']);
    expect(await stranger.exit).toBe(1);
    expect(stranger.stderr()).toMatch(
      /ERROR: This SSH key \(SHA256:\S+\) is not an SSH credential/,
    );
    expect(stranger.stdout()).toBe('');

    const shell = ssh(join(keys, 'ed'), `0:localhost:${web.port}`, []);
    expect(await shell.exit).toBe(1);
    expect(shell.stderr()).toMatch(/ERROR: Burrow has no shell/);

    const other = ssh(join(keys, 'ed'), `0:localhost:${web.port}`, ['cat', '/etc/passwd']);
    expect(await other.exit).toBe(2);
    expect(other.stderr()).toMatch(/"cat" is not http, tcp or tls/);
    expect(other.stdout()).toBe('');

    const limited = keygen('limited', 'ed25519');
    expect((await addKey(limited, { acl: ['bind:allowed.burrow.test'] })).status).toBe(201);
    const denied = ssh(limited, `0:localhost:${web.port}`, ['http', '--url', 'other.burrow.test']);
    expect(await denied.exit).toBe(1);
    expect(denied.stderr()).toMatch(/other\.burrow\.test[\s\S]*ERR_NGROK_316/);
  });

  it('a deleted SSH credential closes its live session and takes its endpoint offline', async () => {
    const key = keygen('revoked', 'ed25519');
    const created = await addKey(key);
    const run = ssh(key, `0:localhost:${web.port}`, ['http']);
    const url = await forwardingUrl(run);
    expect((await publicGet(url, '/')).status).toBe(200);
    const deleted = await edge.api.delete(`/ssh_credentials/${created.body.id as string}`);
    expect(deleted.status).toBe(204);
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toMatch(/was revoked \(its SSH credential was deleted\)/);
    await endpointGone(url);
    expect((await publicGet(url, '/')).status).toBe(404);
  });

  it("deactivating the key's bot user closes its live session", async () => {
    const bot = await edge.api.post('/bot_users', { name: 'ssh fleet' });
    expect(bot.status).toBe(201);
    const key = keygen('fleet', 'ed25519');
    expect((await addKey(key, { owner_id: bot.body.id })).status).toBe(201);
    const run = ssh(key, `0:localhost:${web.port}`, ['http']);
    const url = await forwardingUrl(run);
    const patched = await edge.api.patch(`/bot_users/${bot.body.id as string}`, { active: false });
    expect(patched.status).toBe(200);
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toMatch(/The owner of SSH key sshcr_\S+ was deactivated/);
    await endpointGone(url);
  });
});
