import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { certificateMaker } from './certificates.js';
import { freePort } from './server-process.js';

/**
 * Debian's `pebble`, the ACME test server, for tests: its own HTTPS listener uses a certificate
 * made here, it validates HTTP-01 on `httpPort` and resolves names (A, TXT, CAA) through
 * `dnsServer`. `.ci/run` installs the package.
 */
export interface Pebble {
  /** The ACME directory URL. */
  directoryUrl: string;
  /** PEM file of the CA that signed pebble's own HTTPS certificate (for `--acme-ca-cert`). */
  listenerCaFile: string;
  /** The root that signs the certificates pebble issues (its management port's /roots/0). */
  issuingRootPem(): Promise<string>;
  /** Everything pebble printed, for failure messages. */
  output(): string;
  close(): Promise<void>;
}

function httpsGet(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Start pebble on free loopback ports.
 * @example const pebble = await startPebble({ httpPort: 8080, dnsServer: '127.0.0.1:5053' });
 */
export async function startPebble(options: { httpPort: number; dnsServer: string }) {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-pebble-'));
  const maker = certificateMaker();
  const cert = maker.make('/CN=pebble test listener', [
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
    'basicConstraints=critical,CA:TRUE',
  ]);
  const certFile = join(dir, 'listener.pem');
  const keyFile = join(dir, 'listener.key');
  writeFileSync(certFile, cert);
  writeFileSync(keyFile, maker.lastKey());
  maker.cleanup();
  const [port, managementPort] = [await freePort(), await freePort()];
  const configFile = join(dir, 'pebble.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${port}`,
        managementListenAddress: `127.0.0.1:${managementPort}`,
        certificate: certFile,
        privateKey: keyFile,
        httpPort: options.httpPort,
        tlsPort: await freePort(),
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  let output = '';
  const child: ChildProcess = spawn(
    'pebble',
    ['-config', configFile, '-dnsserver', options.dnsServer],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      // No sleeping before validations, no nonce rejections: fast and deterministic.
      env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0' },
    },
  );
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  const directoryUrl = `https://127.0.0.1:${port}/dir`;
  const until = Date.now() + 15_000;
  for (;;) {
    try {
      if ((await httpsGet(directoryUrl, cert)).status === 200) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > until || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`pebble did not start: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const pebble: Pebble = {
    directoryUrl,
    listenerCaFile: certFile,
    async issuingRootPem() {
      const res = await httpsGet(`https://127.0.0.1:${managementPort}/roots/0`, cert);
      if (res.status !== 200) throw new Error(`pebble /roots/0 answered ${res.status}`);
      return res.body;
    },
    output: () => output,
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return pebble;
}
