import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../edge/certificates/certificates.js';
import { readAgentConfig, resolveTunnelSettings } from './agent-config.js';
import { addCa, localServerCa, readCaSource, trustOptions } from './ca-config.js';

describe('trust of the agent commands', () => {
  let dir: string;
  let ca: LocalCa;
  let other: LocalCa;
  let site: Server;
  let siteUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-ca-config-'));
    ca = await LocalCa.loadOrCreate(join(dir, 'server', 'burrow-data'));
    other = await LocalCa.loadOrCreate(join(dir, 'other'));
    site = createServer((req, res) => {
      if (req.url === '/ca.pem') res.end(ca.certPem);
      else res.writeHead(404).end('no');
    });
    site.listen(0, '127.0.0.1');
    await once(site, 'listening');
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    site.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds ./burrow-data/ca.pem of a server started in the folder', () => {
    expect(localServerCa(join(dir, 'server'))).toBe(join(dir, 'server', 'burrow-data', 'ca.pem'));
    expect(localServerCa(dir)).toBeUndefined();
  });

  it('uses that CA without --ca, saying so once; --ca wins; stored CAs always count', () => {
    const said: string[] = [];
    const say = (line: string): number => said.push(line);
    const cwd = join(dir, 'server');
    const none = resolveTunnelSettings({}, {}, {});
    expect(trustOptions(none, say, cwd)).toEqual({
      ca: [join(cwd, 'burrow-data', 'ca.pem')],
      caFingerprint: undefined,
    });
    expect(said).toEqual([
      'burrow: trusting the CA of the server in this folder, ./burrow-data/ca.pem (--ca <file> to use another)',
    ]);
    const flagged = resolveTunnelSettings(
      { ca: '/x/ca.pem', caFingerprint: 'sha256:AB' },
      {},
      { ca_certs: [other.certPem] },
    );
    expect(trustOptions(flagged, say, cwd)).toEqual({
      ca: ['/x/ca.pem', other.certPem],
      caFingerprint: 'sha256:AB',
    });
    expect(said).toHaveLength(1);
    expect(trustOptions(none, say, dir)).toEqual({ ca: undefined, caFingerprint: undefined });
  });

  it('reads the fingerprint from flag, environment, then config file', () => {
    const file = { ca_fingerprint: 'file' };
    expect(resolveTunnelSettings({}, {}, file).caFingerprint).toBe('file');
    expect(resolveTunnelSettings({}, { BURROW_CA_FINGERPRINT: 'env' }, file).caFingerprint).toBe(
      'env',
    );
    expect(
      resolveTunnelSettings({ caFingerprint: 'flag' }, { BURROW_CA_FINGERPRINT: 'env' }, file)
        .caFingerprint,
    ).toBe('flag');
  });

  it('add-ca stores a file once, mode 0600, keeping the other keys', async () => {
    const path = join(dir, 'cfg-file', 'burrow', 'config.yaml');
    mkdirSync(join(dir, 'cfg-file', 'burrow'), { recursive: true });
    writeFileSync(path, 'authtoken: tok\n');
    const first = await addCa(path, ca.certPath, undefined);
    const fp = new X509Certificate(ca.certPem).fingerprint256;
    expect(first.out).toEqual([
      `Added CA "${/CN=(.*)/.exec(ca.subject)![1]!.replace(/, O=.*/, '')}" sha256:${fp} (${path})`,
    ]);
    expect(first.err).toEqual([]);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readAgentConfig(path)).toMatchObject({ authtoken: 'tok', ca_certs: [ca.certPem] });
    const again = await addCa(path, ca.certPath, `sha256:${fp}`);
    expect(again.out[0]).toMatch(/^Already trusted: CA /);
    await addCa(path, other.certPath, undefined);
    expect(readAgentConfig(path).ca_certs).toEqual([ca.certPem, other.certPem]);
  });

  it('add-ca fetches a URL; over plain HTTP it asks to compare, unless a fingerprint checked it', async () => {
    const path = join(dir, 'cfg-url', 'config.yaml');
    const fp = new X509Certificate(ca.certPem).fingerprint256;
    const unchecked = await addCa(path, `${siteUrl}/ca.pem`, undefined);
    expect(unchecked.out[0]).toMatch(/^Added CA /);
    expect(unchecked.err[0]).toMatch(/came over plain HTTP.*compare the fingerprint/);
    const checked = await addCa(path, `${siteUrl}/ca.pem`, fp.replace(/:/g, ''));
    expect(checked.err).toEqual([]);
    await expect(addCa(path, `${siteUrl}/ca.pem`, `sha256:${'00'.repeat(32)}`)).rejects.toThrow(
      /holds ".*" sha256:.*, not the certificate sha256:00:00:.*: nothing was stored/,
    );
    expect(readAgentConfig(path).ca_certs).toHaveLength(1);
  });

  it('says what is wrong with a source', async () => {
    await expect(readCaSource(join(dir, 'missing.pem'))).rejects.toThrow(
      /^cannot read the CA file .*missing\.pem: ENOENT/,
    );
    writeFileSync(join(dir, 'text.pem'), 'hello');
    await expect(readCaSource(join(dir, 'text.pem'))).rejects.toThrow(
      /text\.pem holds no PEM certificate/,
    );
    await expect(readCaSource(`${siteUrl}/nope`)).rejects.toThrow(/HTTP 404/);
    const closed = createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(readCaSource(`http://127.0.0.1:${port}/ca.pem`)).rejects.toThrow(
      /^cannot fetch http:\/\/127\.0\.0\.1:\d+\/ca\.pem: .*ECONNREFUSED.*give its path instead/,
    );
  });
});
