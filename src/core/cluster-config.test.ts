import { describe, expect, it } from 'vitest';
import { nodeIdProblem, parseClusterConfig } from './cluster-config.js';

/** The cluster options with `values` set, the rest at their defaults. */
function parse(values: Record<string, string>): ReturnType<typeof parseClusterConfig> {
  return parseClusterConfig(
    (name, def) => values[name] ?? def,
    (name, rule) => new Error(`--${name}: ${rule}`),
  );
}

describe('cluster options', () => {
  it('takes the defaults', () => {
    expect(parse({})).toEqual({
      nodeId: '',
      nodeListen: '127.0.0.1:0',
      nodeAdvertise: '',
      heartbeatMs: 1000,
      timeoutMs: 5000,
      reconcileMs: 300_000,
    });
  });

  it('has one rule for node ids', () => {
    for (const good of ['edge-a', 'node_2abc', 'a'.repeat(63)]) {
      expect(nodeIdProblem(good)).toBeUndefined();
      expect(parse({ 'node-id': good }).nodeId).toBe(good);
    }
    for (const bad of ['-x', 'a b', 'a.b', 'CN=x,O=y', 'a'.repeat(64), 'é']) {
      expect(nodeIdProblem(bad)).toMatch(/1-63 letters/);
      expect(() => parse({ 'node-id': bad })).toThrow(/^--node-id: .* must be 1-63 letters/);
    }
  });

  it('asks for --node-advertise when --node-listen is every address, however written', () => {
    for (const listen of ['0.0.0.0:7443', '[::]:7443', '[::0]:7443', '[0:0:0:0:0:0:0:0]:7443']) {
      expect(() => parse({ 'node-listen': listen })).toThrow(
        /^--node-advertise: required with --node-listen .* the host:port the other nodes dial/,
      );
      expect(parse({ 'node-listen': listen, 'node-advertise': '10.0.0.5:7443' })).toMatchObject({
        nodeListen: listen,
        nodeAdvertise: '10.0.0.5:7443',
      });
    }
    expect(parse({ 'node-listen': '[::1]:7443' }).nodeAdvertise).toBe('');
  });

  it('keeps the node timeout at least twice the heartbeat', () => {
    expect(() => parse({ 'node-heartbeat-ms': '3000' })).toThrow(/--node-timeout-ms: 5000/);
    expect(() => parse({ 'node-heartbeat-ms': 'soon' })).toThrow(/whole number/);
  });

  it('takes --store-reconcile-ms as 0 (off) or 1 s to 1 day', () => {
    expect(parse({ 'store-reconcile-ms': '0' }).reconcileMs).toBe(0);
    expect(parse({ 'store-reconcile-ms': '60000' }).reconcileMs).toBe(60_000);
    for (const bad of ['500', '86400001', '-1', '5m', '']) {
      expect(() => parse({ 'store-reconcile-ms': bad })).toThrow(
        /^--store-reconcile-ms: .* must be 0 \(no periodic reload\) or a whole number of milliseconds from 1000 to 86400000/,
      );
    }
  });
});
