import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { nodeIdProblem } from '../../core/cluster-config.js';
import { openStore } from '../../store/database.js';
import { SettingsRepository } from '../../store/settings.js';
import { CLUSTER_CA_KEY, nodeCredentials, type CaSettings } from './cluster-ca.js';

/** Settings in memory that race like the store's: read, then insert unless someone did first. */
class MemorySettings implements CaSettings {
  readonly values = new Map<string, string>();
  async getOrCreate(key: string, make: () => string): Promise<string> {
    const existing = this.values.get(key);
    if (existing !== undefined) return existing;
    await sleep(1);
    const value = make();
    if (!this.values.has(key)) this.values.set(key, value);
    return this.values.get(key)!;
  }
}

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

describe('nodeCredentials', () => {
  it('creates one CA in the settings and issues a node certificate from it', async () => {
    const settings = new MemorySettings();
    const a = await nodeCredentials(settings, 'node_2abcDEF');
    const b = await nodeCredentials(settings, 'edge-b');
    expect(a.caPem).toBe(b.caPem);
    expect(settings.values.size).toBe(1);
    const stored = JSON.parse(settings.values.get(CLUSTER_CA_KEY)!) as { cert: string };
    expect(stored.cert).toBe(a.caPem);

    const ca = new X509Certificate(a.caPem);
    expect(ca.ca).toBe(true);
    expect(ca.subject).toMatch(/^CN=Burrow cluster CA [0-9a-f]{8}\nO=Burrow$/);
    expect(ca.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const years = (new Date(ca.validTo).getTime() - Date.now()) / (365 * 24 * 3600 * 1000);
    expect(years).toBeGreaterThan(9.9);

    for (const creds of [a, b]) {
      const leaf = new X509Certificate(creds.certPem);
      expect(leaf.ca).toBe(false);
      expect(leaf.verify(ca.publicKey)).toBe(true);
      expect(leaf.checkIssued(ca)).toBe(true);
      expect(leaf.checkPrivateKey(createPrivateKey(creds.keyPem))).toBe(true);
      expect(leaf.subject.split('\n')).toContain(`CN=${creds.nodeId}`);
      expect(leaf.keyUsage).toEqual(expect.arrayContaining([SERVER_AUTH, CLIENT_AUTH]));
      const days = (new Date(leaf.validTo).getTime() - Date.now()) / (24 * 3600 * 1000);
      expect(days).toBeGreaterThan(364);
      expect(days).toBeLessThan(366);
    }
    expect(a.nodeId).toBe('node_2abcDEF');
    // Each start gets a fresh key.
    const again = await nodeCredentials(settings, 'node_2abcDEF');
    expect(again.keyPem).not.toBe(a.keyPem);
    expect(again.caPem).toBe(a.caPem);
  });

  it('nodes starting together agree on one CA', async () => {
    const settings = new MemorySettings();
    const all = await Promise.all(
      ['n1', 'n2', 'n3', 'n4'].map((id) => nodeCredentials(settings, id)),
    );
    expect(new Set(all.map((c) => c.caPem)).size).toBe(1);
    const ca = new X509Certificate(all[0]!.caPem);
    for (const c of all) expect(new X509Certificate(c.certPem).checkIssued(ca)).toBe(true);
  });

  it('keeps the CA in the real settings table', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'burrow-cluster-ca-'));
    const store = await openStore({ database: '', dataDir });
    try {
      const settings = new SettingsRepository(store.db);
      const [a, b] = await Promise.all([
        nodeCredentials(settings, 'edge-a'),
        nodeCredentials(settings, 'edge-b'),
      ]);
      expect(a.caPem).toBe(b.caPem);
      expect(await settings.get(CLUSTER_CA_KEY)).toContain(JSON.stringify(a.caPem).slice(1, 40));
    } finally {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses node ids a certificate cannot carry, and a damaged stored CA', async () => {
    expect(nodeIdProblem('edge-a')).toBeUndefined();
    expect(nodeIdProblem('node_2abc')).toBeUndefined();
    for (const bad of ['', '-x', 'a b', 'CN=x,O=y', 'x'.repeat(65), 'é']) {
      expect(nodeIdProblem(bad)).toBeDefined();
      await expect(nodeCredentials(new MemorySettings(), bad)).rejects.toThrow(TypeError);
    }
    const damaged = new MemorySettings();
    damaged.values.set(CLUSTER_CA_KEY, '{"cert":"nope"}');
    await expect(nodeCredentials(damaged, 'edge-a')).rejects.toThrow(/cluster_ca/);
  });
});
