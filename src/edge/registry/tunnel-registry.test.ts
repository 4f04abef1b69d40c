import { PassThrough, type Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseCloudEndpointUrl } from '../binds/cloud-endpoint-url.js';
import { internalOnline, MAX_FORWARD_HOPS, resolveInternal } from './internal-routing.js';
import {
  trackStream,
  TunnelConflictError,
  TunnelRegistry,
  type OnlineTunnel,
} from './tunnel-registry.js';

let n = 0;
function tunnel(where: Partial<OnlineTunnel>): OnlineTunnel {
  n++;
  return {
    id: `tn_${n}`,
    sessionId: `ts_${n}`,
    bindId: `b_${n}`,
    proto: 'https',
    url: undefined,
    forwardsTo: '',
    metadata: '',
    startedAt: '',
    connect: () => Promise.reject<Duplex>(new Error('not used')),
    ...where,
  };
}

describe('TunnelRegistry pools and internal endpoints', () => {
  it('shares a name round robin between pooling tunnels; a removed member leaves at once', () => {
    const registry = new TunnelRegistry();
    const a = tunnel({ hostname: 'app.example.com', pooling: true });
    const b = tunnel({ hostname: 'app.example.com', pooling: true });
    registry.addTunnel(a);
    registry.addTunnel(b);
    const head = registry.byHost('app.example.com')!;
    const picks = Array.from({ length: 10 }, () => registry.pick(head).id);
    expect(new Set(picks)).toEqual(new Set([a.id, b.id]));
    expect(picks.filter((id) => id === a.id)).toHaveLength(5);
    registry.removeTunnel(a.id);
    const after = registry.byHost('app.example.com')!;
    expect(Array.from({ length: 5 }, () => registry.pick(after).id)).toEqual(Array(5).fill(b.id));
    registry.removeTunnel(b.id);
    expect(registry.byHost('app.example.com')).toBeUndefined();
  });

  it("sends a pool's next connection to the member with the fewest open streams", async () => {
    const registry = new TunnelRegistry();
    const [a, b, c] = [1, 2, 3].map(() => tunnel({ hostname: 'lc.example.com', pooling: true }));
    for (const t of [a!, b!, c!]) registry.addTunnel(t);
    const head = registry.byHost('lc.example.com')!;
    // a holds two long connections, b one: new ones go to c until it has as many as b.
    const streams = [new PassThrough(), new PassThrough(), new PassThrough()];
    trackStream(a!, streams[0]!);
    trackStream(a!, streams[1]!);
    trackStream(b!, streams[2]!);
    expect(registry.pick(head).id).toBe(c!.id);
    trackStream(c!, new PassThrough());
    // b and c tie at one: round robin between them, never a.
    const picks = new Set(Array.from({ length: 4 }, () => registry.pick(head).id));
    expect(picks).toEqual(new Set([b!.id, c!.id]));
    // a's connections close: it is the least busy again.
    streams[0]!.destroy();
    streams[1]!.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(registry.pick(head).id).toBe(a!.id);
  });

  it('refuses a second tunnel unless both pool, naming the holder and its session', () => {
    const registry = new TunnelRegistry();
    const a = tunnel({ port: 20001, proto: 'tcp', pooling: true });
    registry.addTunnel(a);
    expect(() => registry.addTunnel(tunnel({ port: 20001, proto: 'tcp' }))).toThrow(
      TunnelConflictError,
    );
    const solo = new TunnelRegistry();
    solo.addTunnel(tunnel({ hostname: 'x.example.com' }));
    expect(() => solo.addTunnel(tunnel({ hostname: 'x.example.com', pooling: true }))).toThrow(
      /of agent session ts_/,
    );
  });

  it('keeps internal endpoints off every public lookup', () => {
    const registry = new TunnelRegistry();
    const api = tunnel({ internal: 'api.internal', url: 'https://api.internal' });
    registry.addTunnel(api);
    expect(registry.byHost('api.internal')).toBeUndefined();
    expect(registry.internal('api.internal')).toBe(api);
    expect(internalOnline(registry, 'https://api.internal/x')).toBe(true);
    expect(internalOnline(registry, 'https://web.internal')).toBe(false);
  });

  it('detects loops and a chain over the hop limit', () => {
    const registry = new TunnelRegistry();
    const a = tunnel({ internal: 'a.internal' });
    const b = tunnel({ internal: 'b.internal' });
    registry.addTunnel(a);
    registry.addTunnel(b);
    const front = tunnel({ hostname: 'app.example.com' });
    const first = resolveInternal(registry, 'https://a.internal', [], front);
    expect(first).toEqual({ next: a, chain: ['app.example.com'] });
    const second = resolveInternal(registry, 'https://b.internal', ['app.example.com'], a);
    expect(second).toEqual({ next: b, chain: ['app.example.com', 'a.internal'] });
    expect(
      resolveInternal(registry, 'https://a.internal', ['app.example.com', 'a.internal'], b),
    ).toEqual({
      kind: 'loop',
      chain: ['app.example.com', 'a.internal', 'b.internal', 'a.internal'],
    });
    const long = Array.from({ length: MAX_FORWARD_HOPS }, (_, i) => `h${i}.internal`);
    expect(resolveInternal(registry, 'https://b.internal', long.slice(1), a)).toMatchObject({
      kind: 'hops',
    });
    expect(resolveInternal(registry, 'https://gone.internal', [], front)).toEqual({
      kind: 'offline',
      key: 'gone.internal',
    });
  });
});

describe('parseCloudEndpointUrl', () => {
  it('reads names, wildcards, TCP addresses and internal URLs', () => {
    expect(parseCloudEndpointUrl('https://App.Example.com/')).toMatchObject({
      proto: 'https',
      hostname: 'app.example.com',
      url: 'https://app.example.com',
    });
    expect(parseCloudEndpointUrl('https://*.example.com')).toMatchObject({
      hostname: '*.example.com',
    });
    expect(parseCloudEndpointUrl('tcp://tcp.example.com:20000')).toMatchObject({
      addr: 'tcp.example.com:20000',
      port: 20000,
    });
    expect(parseCloudEndpointUrl('tcp://db.internal:5432')).toMatchObject({
      internal: 'db.internal:5432',
    });
    expect(parseCloudEndpointUrl('https://api.internal')).toMatchObject({
      internal: 'api.internal',
    });
    expect(parseCloudEndpointUrl('ftp://x.example.com')).toMatch(/scheme 'ftp'/);
    expect(parseCloudEndpointUrl('https://x.example.com/path')).toMatch(/no path/);
    expect(parseCloudEndpointUrl('tcp://x.example.com')).toMatch(/host:port/);
  });
});
