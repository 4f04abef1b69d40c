import { execFileSync, spawn } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalCa, publishExclusive } from './local-ca.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-ca-'));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The PEM blocks of a chain, in order. */
function pemBlocks(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? [];
}

describe('LocalCa.loadOrCreate', () => {
  it('creates a P-256 CA certificate and key in the data folder on first use', async () => {
    const dir = tempDir();
    const ca = await LocalCa.loadOrCreate(join(dir, 'nested', 'data'));
    const certPem = readFileSync(join(dir, 'nested', 'data', 'ca.pem'), 'utf8');
    const keyPem = readFileSync(join(dir, 'nested', 'data', 'ca-key.pem'), 'utf8');
    expect(ca.certPem).toBe(certPem);
    expect(ca.certPath).toBe(join(dir, 'nested', 'data', 'ca.pem'));

    const cert = new X509Certificate(certPem);
    expect(cert.ca).toBe(true);
    expect(cert.subject).toMatch(/^CN=Burrow local CA [0-9a-f]{8}\nO=Burrow$/);
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(keyPem))).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const years = (new Date(cert.validTo).getTime() - Date.now()) / (365 * DAY_MS);
    expect(years).toBeGreaterThan(9.9);
    expect(years).toBeLessThan(10.1);
    expect(ca.subject).toMatch(/^CN=Burrow local CA [0-9a-f]{8}, O=Burrow$/);

    const text = execFileSync('openssl', ['x509', '-noout', '-text'], {
      input: certPem,
    }).toString();
    expect(text).toMatch(/Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
    expect(text).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign/);
  });

  it('writes ca.pem as 0644 and ca-key.pem as 0600 whatever the umask', async () => {
    for (const umask of [0o077, 0o000]) {
      const dir = tempDir();
      const previous = process.umask(umask);
      try {
        await LocalCa.loadOrCreate(dir);
      } finally {
        process.umask(previous);
      }
      expect(statSync(join(dir, 'ca.pem')).mode & 0o777).toBe(0o644);
      expect(statSync(join(dir, 'ca-key.pem')).mode & 0o777).toBe(0o600);
      expect(readdirSync(dir).sort()).toEqual(['ca-key.pem', 'ca.pem']);
    }
  });

  it('loads the same CA on later starts, and its leaves verify against the first ca.pem', async () => {
    const dir = tempDir();
    const first = await LocalCa.loadOrCreate(dir);
    const keyBefore = readFileSync(join(dir, 'ca-key.pem'), 'utf8');
    const second = await LocalCa.loadOrCreate(dir);
    expect(second.certPem).toBe(first.certPem);
    expect(second.subject).toBe(first.subject);
    expect(readFileSync(join(dir, 'ca-key.pem'), 'utf8')).toBe(keyBefore);

    const leaf = new X509Certificate(
      pemBlocks((await second.issue(['a.example.com'])).certPem)[0]!,
    );
    expect(leaf.checkIssued(new X509Certificate(first.certPem))).toBe(true);
    expect(leaf.verify(new X509Certificate(first.certPem).publicKey)).toBe(true);
  });

  it('ends with one matching pair when many loads race in one process', async () => {
    const dir = tempDir();
    const cas = await Promise.all(Array.from({ length: 12 }, () => LocalCa.loadOrCreate(dir)));
    const onDisk = readFileSync(join(dir, 'ca.pem'), 'utf8');
    for (const ca of cas) expect(ca.certPem).toBe(onDisk);
    await expect(LocalCa.loadOrCreate(dir)).resolves.toBeInstanceOf(LocalCa);
    expect(readdirSync(dir).sort()).toEqual(['ca-key.pem', 'ca.pem']);
  });

  it('ends with one matching pair when several processes start at the same moment', async () => {
    const script = join(tempDir(), 'start.mjs');
    // Each process loads the module once, then for every folder sent on stdin (the same line
    // reaches all processes at nearly the same moment) loads or creates the CA there.
    writeFileSync(
      script,
      [
        "import { createInterface } from 'node:readline';",
        'const { LocalCa } = await import(process.argv[2]);',
        "process.stdout.write('ready\\n');",
        'for await (const dir of createInterface({ input: process.stdin })) {',
        '  const ca = await LocalCa.loadOrCreate(dir);',
        '  process.stdout.write(JSON.stringify(ca.certPem) + "\\n");',
        '}',
      ].join('\n'),
    );
    const modulePath = fileURLToPath(new URL('./local-ca.ts', import.meta.url));
    const children = Array.from({ length: 5 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', script, modulePath], {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      const nextLine = async (): Promise<string> => {
        const line = await lines.next();
        if (line.done) throw new Error('child exited early');
        return line.value;
      };
      return { child, nextLine };
    });
    try {
      for (const { nextLine } of children) expect(await nextLine()).toBe('ready');
      for (let round = 0; round < 6; round++) {
        const dir = tempDir();
        for (const { child } of children) child.stdin.write(dir + '\n');
        const pems = await Promise.all(children.map(async (c) => JSON.parse(await c.nextLine())));
        const onDisk = readFileSync(join(dir, 'ca.pem'), 'utf8');
        for (const pem of pems) expect(pem).toBe(onDisk);
        const cert = new X509Certificate(onDisk);
        const key = createPrivateKey(readFileSync(join(dir, 'ca-key.pem'), 'utf8'));
        expect(cert.checkPrivateKey(key)).toBe(true);
        expect(readdirSync(dir).sort()).toEqual(['ca-key.pem', 'ca.pem']);
      }
    } finally {
      for (const { child } of children) child.stdin.end();
      await Promise.all(children.map(({ child }) => once(child, 'exit')));
    }
  }, 60_000);

  it('completes a start that crashed between the key and the certificate, keeping the key', async () => {
    const dir = tempDir();
    await LocalCa.loadOrCreate(dir);
    const key = readFileSync(join(dir, 'ca-key.pem'), 'utf8');
    rmSync(join(dir, 'ca.pem'));
    // A crash may also leave a temporary file behind; it must not be mistaken for the CA.
    writeFileSync(join(dir, 'ca.pem.123.abcdef.tmp'), '-----BEGIN CERT');
    const ca = await LocalCa.loadOrCreate(dir);
    expect(readFileSync(join(dir, 'ca-key.pem'), 'utf8')).toBe(key);
    expect(new X509Certificate(ca.certPem).checkPrivateKey(createPrivateKey(key))).toBe(true);
  });

  it('refuses a ca.pem without its key, or with a different key, instead of replacing it', async () => {
    const dir = tempDir();
    await LocalCa.loadOrCreate(dir);
    const other = tempDir();
    await LocalCa.loadOrCreate(other);
    const certPem = readFileSync(join(dir, 'ca.pem'), 'utf8');

    writeFileSync(join(dir, 'ca-key.pem'), readFileSync(join(other, 'ca-key.pem')));
    await expect(LocalCa.loadOrCreate(dir)).rejects.toThrow(/does not match its key ca-key\.pem/);
    rmSync(join(dir, 'ca-key.pem'));
    await expect(LocalCa.loadOrCreate(dir)).rejects.toThrow(/ca-key\.pem is missing/);
    expect(readFileSync(join(dir, 'ca.pem'), 'utf8')).toBe(certPem);
  });

  it('refuses a ca.pem that is not a CA certificate', async () => {
    const dir = tempDir();
    const ca = await LocalCa.loadOrCreate(tempDir());
    const leaf = await ca.issue(['a.example.com']);
    writeFileSync(join(dir, 'ca.pem'), pemBlocks(leaf.certPem)[0]!);
    writeFileSync(join(dir, 'ca-key.pem'), leaf.keyPem);
    await expect(LocalCa.loadOrCreate(dir)).rejects.toThrow(/is not a CA certificate/);
  });
});

describe('publishExclusive', () => {
  it('never replaces an existing file and leaves no temporary file', async () => {
    const dir = tempDir();
    const path = join(dir, 'x.pem');
    await publishExclusive(path, 'first', 0o600);
    await publishExclusive(path, 'second', 0o644);
    expect(readFileSync(path, 'utf8')).toBe('first');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['x.pem']);
  });
});

describe('LocalCa.issue', () => {
  it('issues a 90-day serverAuth P-256 leaf with DNS, wildcard and IP SANs, chained to the CA', async () => {
    const dir = tempDir();
    const ca = await LocalCa.loadOrCreate(dir);
    const issued = await ca.issue([
      'App.Example.com.',
      '*.sitea.example.com',
      '127.0.0.1',
      '[::1]',
      'app.example.com',
    ]);
    expect(issued.names).toEqual(['app.example.com', '*.sitea.example.com', '127.0.0.1', '::1']);
    const [leafPem, caPem, ...rest] = pemBlocks(issued.certPem);
    expect(rest).toEqual([]);
    expect(caPem).toBe(ca.certPem);

    const leaf = new X509Certificate(leafPem!);
    const caCert = new X509Certificate(ca.certPem);
    expect(leaf.ca).toBe(false);
    expect(leaf.subject).toBe('CN=app.example.com');
    expect(leaf.issuer).toBe(caCert.subject);
    expect(leaf.checkIssued(caCert)).toBe(true);
    expect(leaf.verify(caCert.publicKey)).toBe(true);
    expect(leaf.subjectAltName).toBe(
      'DNS:app.example.com, DNS:*.sitea.example.com, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    expect(leaf.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(leaf.checkPrivateKey(createPrivateKey(issued.keyPem))).toBe(true);
    expect(createPrivateKey(issued.keyPem).asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(issued.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    const days = (new Date(leaf.validTo).getTime() - Date.now()) / DAY_MS;
    expect(days).toBeGreaterThan(89.9);
    expect(days).toBeLessThan(90.1);
    expect(new Date(leaf.validFrom).getTime()).toBeLessThan(Date.now());
    expect(leaf.serialNumber.toLowerCase()).toBe(issued.serialNumber.toLowerCase());
    expect((await ca.issue(['app.example.com'])).serialNumber).not.toBe(issued.serialNumber);

    const leafFile = join(dir, 'leaf.pem');
    writeFileSync(leafFile, leafPem!);
    const verified = execFileSync('openssl', [
      'verify',
      '-CAfile',
      join(dir, 'ca.pem'),
      '-purpose',
      'sslserver',
      '-verify_hostname',
      'dev1.sitea.example.com',
      leafFile,
    ]).toString();
    expect(verified.trim()).toBe(`${leafFile}: OK`);
    const text = execFileSync('openssl', ['x509', '-noout', '-text', '-in', leafFile]).toString();
    expect(text).toMatch(/Basic Constraints: critical\s+CA:FALSE/);
    expect(text).toMatch(/Key Usage: critical\s+Digital Signature/);
    expect(text).toMatch(/Authority Key Identifier/);
  });

  it('fails openssl verification for a name the leaf does not cover', async () => {
    const dir = tempDir();
    const ca = await LocalCa.loadOrCreate(dir);
    const leafFile = join(dir, 'leaf.pem');
    writeFileSync(leafFile, pemBlocks((await ca.issue(['*.sitea.example.com'])).certPem)[0]!);
    const args = ['verify', '-CAfile', join(dir, 'ca.pem'), '-verify_hostname'];
    // A certificate wildcard covers exactly one label.
    expect(() =>
      execFileSync('openssl', [...args, 'a.b.sitea.example.com', leafFile], { stdio: 'pipe' }),
    ).toThrow(/hostname mismatch/);
  });

  it('never issues past the CA expiry', async () => {
    const created = new Date(Date.now() - (3650 - 10) * DAY_MS);
    const ca = await LocalCa.loadOrCreate(tempDir(), { now: created });
    const issued = await ca.issue(['a.example.com']);
    expect(issued.notAfter.getTime()).toBe(ca.notAfter.getTime());
    expect(ca.notAfter.getTime() - Date.now()).toBeLessThan(11 * DAY_MS);
  });

  it('refuses names that cannot be certified', async () => {
    const ca = await LocalCa.loadOrCreate(tempDir());
    await expect(ca.issue([])).rejects.toThrow(/at least one name/);
    await expect(ca.issue(['a.*.example.com'])).rejects.toThrow(/"a\.\*\.example\.com"/);
    await expect(ca.issue(['*.com'])).rejects.toThrow(/two labels after/);
    await expect(ca.issue(['bad_label.example.com'])).rejects.toThrow(/bad_label/);
  });

  it('takes well under 250 ms per leaf (P-256 keys are cheap; RSA would not be)', async () => {
    const ca = await LocalCa.loadOrCreate(tempDir());
    await ca.issue(['warm.example.com']);
    const started = performance.now();
    for (let i = 0; i < 20; i++) await ca.issue([`n${i}.example.com`]);
    expect((performance.now() - started) / 20).toBeLessThan(250);
  });
});
