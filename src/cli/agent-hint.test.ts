import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalCa } from '../edge/certificates/certificates.js';
import { agentConnectHint } from './agent-hint.js';

describe('the agent hint of burrow server', () => {
  let dir: string;
  let ca: LocalCa;
  let fp: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-agent-hint-'));
    ca = await LocalCa.loadOrCreate(join(dir, 'burrow-data'));
    fp = `sha256:${new X509Certificate(ca.certPem).fingerprint256}`;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const base = () => ({
    agentAddress: '127.0.0.1:4443',
    caPem: ca.certPem,
    caPath: join(dir, 'burrow-data', 'ca.pem'),
    cwd: dir,
    realCertificate: undefined,
  });

  it('on defaults: no flag but the token here, the fingerprint elsewhere, and the loopback caveat', () => {
    const hint = agentConnectHint(base());
    expect(hint.caFingerprint).toBe(fp);
    expect(hint.localCommand).toBe('burrow http 3000 --authtoken <token>');
    expect(hint.remoteCommand).toBe(
      `burrow http 3000 --server 127.0.0.1:4443 --authtoken <token> --ca-fingerprint ${fp}`,
    );
    expect(hint.lines).toEqual([
      'Agents connect to 127.0.0.1:4443; its certificate comes from the local CA burrow-data/ca.pem,',
      `whose SHA-256 fingerprint is ${fp}`,
      'On this machine, in this folder: burrow http 3000 --authtoken <token>',
      `On another machine: ${hint.remoteCommand}`,
      '  (install it there with npm install -g <a clone or the npm pack tarball of this project>; the package named burrow on the npm registry is another project)',
      'Create the <token> with POST /credentials (`burrow api-key create` makes the API key for it).',
      '127.0.0.1 is loopback: for agents on other machines, start with --agent-listen <public name or address>:4443.',
    ]);
  });

  it('with another data folder: --ca with its path on this machine', () => {
    const hint = agentConnectHint({ ...base(), cwd: join(dir, 'elsewhere') });
    expect(hint.localCommand).toBe(
      `burrow http 3000 --authtoken <token> --ca ${join(dir, 'burrow-data', 'ca.pem')}`,
    );
    expect(hint.lines[2]).toMatch(/^On this machine: /);
  });

  it('on every interface: 127.0.0.1 here, a placeholder elsewhere, and the name caveat', () => {
    const hint = agentConnectHint({ ...base(), agentAddress: '0.0.0.0:5443' });
    expect(hint.localCommand).toBe('burrow http 3000 --server 127.0.0.1:5443 --authtoken <token>');
    expect(hint.remoteCommand).toMatch(/--server <this-host>:5443 /);
    expect(hint.lines.at(-1)).toMatch(
      /names only localhost, 127\.0\.0\.1 and ::1: .*--agent-listen/,
    );
    expect(agentConnectHint({ ...base(), agentAddress: '[::]:4443' }).localCommand).toBe(
      'burrow http 3000 --authtoken <token>',
    );
  });

  it('on a public name with a real certificate: no --ca nor fingerprint needed', () => {
    const hint = agentConnectHint({
      ...base(),
      agentAddress: 'edge.example.com:443',
      realCertificate: '/srv/burrow-data/certs/edge.example.com.pem',
    });
    expect(hint.remoteCommand).toBe(
      'burrow http 3000 --server edge.example.com:443 --authtoken <token>',
    );
    expect(hint.lines[0]).toBe(
      'Agents connect to edge.example.com:443, which serves /srv/burrow-data/certs/edge.example.com.pem.',
    );
    expect(hint.lines.join('\n')).not.toMatch(/loopback|fingerprint is/);
  });
});
