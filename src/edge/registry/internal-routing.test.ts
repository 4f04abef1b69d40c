import { describe, expect, it } from 'vitest';
import { fakeTunnel } from '../../../test/support/ingress.js';
import { followInternal, refusalText } from './internal-routing.js';
import { TunnelRegistry } from './tunnel-registry.js';

describe('followInternal (forward-internal for every listener)', () => {
  const registry = new TunnelRegistry();
  const api = { ...fakeTunnel({ proto: 'https', upstreamPort: 1 }), internal: 'api.internal' };
  const db = { ...fakeTunnel({ proto: 'tcp', upstreamPort: 1 }), internal: 'db.internal:5432' };
  registry.addTunnel(api);
  registry.addTunnel(db);
  const from = fakeTunnel({ proto: 'https', hostname: 'front.burrow.test', upstreamPort: 1 });
  const halt = (url: string) => ({ url, onError: 'halt' as const });
  const goOn = (url: string) => ({ url, onError: 'continue' as const });

  it('leads to an internal endpoint of a protocol the listener carries', () => {
    const step = followInternal(registry, halt('https://api.internal'), [], from, [
      'http',
      'https',
    ]);
    expect(step).toEqual({ next: api, chain: ['front.burrow.test'] });
  });

  it('refuses one of another protocol, saying which protocols fit', () => {
    const step = followInternal(registry, halt('tcp://db.internal:5432'), [], from, ['https']);
    expect(step && 'refusal' in step && step.refusal.kind).toBe('protocol');
    expect(step && 'refusal' in step && refusalText(step.refusal)).toMatch(
      /db\.internal:5432, a tcp endpoint; a https connection goes only to a https internal endpoint/,
    );
  });

  it('lets the endpoint itself go on past an offline target with on_error continue, unless it is a cloud endpoint', () => {
    expect(followInternal(registry, goOn('https://gone.internal'), [], from, ['https'])).toBe(
      undefined,
    );
    const cloud = { ...from, cloud: true };
    const step = followInternal(registry, goOn('https://gone.internal'), [], cloud, ['https']);
    expect(step && 'refusal' in step && step.refusal.kind).toBe('offline');
    const halted = followInternal(registry, halt('https://gone.internal'), [], from, ['https']);
    expect(halted && 'refusal' in halted && halted.refusal.kind).toBe('offline');
  });

  it('refuses a loop', () => {
    const step = followInternal(registry, halt('https://api.internal'), ['api.internal'], from, [
      'https',
    ]);
    expect(step && 'refusal' in step && step.refusal.kind).toBe('loop');
  });
});
