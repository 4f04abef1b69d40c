import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../core/logger.js';
import { startTlsServer, tlsProbe } from '../../../test/support/tls.js';
import {
  LocalCa,
  agentListenerCertificate,
  renewServerCertificate,
  type ServerCertificate,
} from './certificates.js';

const DAY_MS = 24 * 60 * 60 * 1000;

let dataDir: string;
let ca: LocalCa;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'burrow-certs-'));
  ca = await LocalCa.loadOrCreate(dataDir);
});

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('agentListenerCertificate', () => {
  it('covers localhost, 127.0.0.1, ::1 and the extra hosts, and agents verify it', async () => {
    const cert = await agentListenerCertificate(ca, { hosts: ['Edge.Example.com', '0.0.0.0'] });
    expect(cert.source).toBe('local-ca');
    expect(new X509Certificate(cert.certPem).subjectAltName).toBe(
      'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, DNS:edge.example.com',
    );
    const server = await startTlsServer({ cert: cert.certPem, key: cert.keyPem });
    try {
      const probe = (o: { servername?: string; verifyAs?: string }) =>
        tlsProbe({ port: server.port, ca: ca.certPem, ...o });
      // Dialling an IP sends no SNI; the client checks the IP SAN.
      expect(await probe({})).toMatchObject({ ok: true });
      expect(await probe({ servername: 'localhost' })).toMatchObject({ ok: true });
      expect(await probe({ servername: 'edge.example.com' })).toMatchObject({ ok: true });
      expect(await probe({ verifyAs: '::1' })).toMatchObject({ ok: true });
      expect(await probe({ servername: 'other.example' })).toMatchObject({
        ok: false,
        error: 'ERR_TLS_CERT_ALTNAME_INVALID',
      });
      expect(await probe({ verifyAs: '10.0.0.1' })).toMatchObject({
        ok: false,
        error: 'ERR_TLS_CERT_ALTNAME_INVALID',
      });
    } finally {
      await server.close();
    }
  });

  it('uses a real certificate from certsDir for one of the hosts', async () => {
    const certsDir = join(dataDir, 'certs');
    mkdirSync(certsDir, { recursive: true });
    const real = await ca.issue(['edge.example.net']);
    writeFileSync(join(certsDir, 'edge.example.net.pem'), real.certPem);
    writeFileSync(join(certsDir, 'edge.example.net.key'), real.keyPem);
    const cert = await agentListenerCertificate(ca, { hosts: ['edge.example.net'], certsDir });
    expect(cert).toMatchObject({ source: 'file', certPem: real.certPem, keyPem: real.keyPem });
    const none = await agentListenerCertificate(ca, { hosts: ['edge.example.org'], certsDir });
    expect(none.source).toBe('local-ca');
  });
});

describe('renewServerCertificate', () => {
  async function shortLived(
    renewInMs: number,
  ): Promise<{ cert: ServerCertificate; renewBeforeMs: number }> {
    const cert = await agentListenerCertificate(ca);
    return { cert, renewBeforeMs: cert.notAfter.getTime() - Date.now() - renewInMs };
  }

  it('installs a fresh certificate on the running server before the old one expires', async () => {
    const { cert, renewBeforeMs } = await shortLived(300);
    const server = await startTlsServer({ cert: cert.certPem, key: cert.keyPem });
    const obtain = vi.fn(() => agentListenerCertificate(ca));
    const renewal = renewServerCertificate(server, cert, obtain, {
      renewBeforeMs,
      minIntervalMs: 60_000,
    });
    try {
      const before = (await tlsProbe({ port: server.port, ca: ca.certPem })).peer?.serialNumber;
      await vi.waitFor(
        async () => {
          const now = (await tlsProbe({ port: server.port, ca: ca.certPem })).peer?.serialNumber;
          expect(now).not.toBe(before);
        },
        { timeout: 5000, interval: 100 },
      );
      expect(obtain).toHaveBeenCalledTimes(1);
      expect(await tlsProbe({ port: server.port, ca: ca.certPem })).toMatchObject({ ok: true });
    } finally {
      renewal.stop();
      await server.close();
    }
  });

  it('retries after a failed renewal and logs it', async () => {
    const { cert, renewBeforeMs } = await shortLived(0);
    const setSecureContext = vi.fn();
    const obtain = vi
      .fn<() => Promise<ServerCertificate>>()
      .mockRejectedValueOnce(new Error('no disk'))
      .mockImplementation(() => agentListenerCertificate(ca));
    const warn = vi.fn();
    const logger = { warn, info: vi.fn() } as unknown as Logger;
    const renewal = renewServerCertificate({ setSecureContext }, cert, obtain, {
      renewBeforeMs,
      minIntervalMs: 100,
      logger,
    });
    try {
      await vi.waitFor(() => expect(setSecureContext).toHaveBeenCalledTimes(1), { timeout: 5000 });
      expect(obtain).toHaveBeenCalledTimes(2);
      expect(warn).toHaveBeenCalledWith(
        expect.anything(),
        'server certificate renewal failed; will retry',
      );
      expect(setSecureContext.mock.calls[0]![0]).toMatchObject({
        cert: expect.stringContaining('BEGIN'),
      });
    } finally {
      renewal.stop();
    }
  });

  it('does nothing before the renewal is due, nor after stop()', async () => {
    const cert = await agentListenerCertificate(ca);
    const obtain = vi.fn(() => agentListenerCertificate(ca));
    const setSecureContext = vi.fn();
    const notDue = renewServerCertificate({ setSecureContext }, cert, obtain, {
      renewBeforeMs: DAY_MS,
    });
    const stopped = renewServerCertificate({ setSecureContext }, cert, obtain, {
      renewBeforeMs: cert.notAfter.getTime() - Date.now() - 50,
    });
    stopped.stop();
    await sleep(300);
    notDue.stop();
    expect(obtain).not.toHaveBeenCalled();
    expect(setSecureContext).not.toHaveBeenCalled();
  });
});
