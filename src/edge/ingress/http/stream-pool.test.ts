import { PassThrough, type Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { fakeTunnel } from '../../../../test/support/ingress.js';
import { StreamPool } from './stream-pool.js';

function stream(): Duplex {
  return new PassThrough();
}

describe('StreamPool', () => {
  const tunnel = fakeTunnel({ proto: 'http', hostname: 'pool.burrow.test' });

  it('gives a parked stream back to the same client only', () => {
    const pool = new StreamPool();
    const s = stream();
    pool.put(tunnel, 'http 203.0.113.7', s);
    expect(pool.take(tunnel, 'http 198.51.100.1')).toBeUndefined();
    expect(pool.take(tunnel, 'http 203.0.113.7')).toBe(s);
    expect(pool.take(tunnel, 'http 203.0.113.7')).toBeUndefined();
  });

  it('drops a parked stream that fails, ends or says anything, without an unhandled error', () => {
    const pool = new StreamPool();
    const failing = stream();
    const ending = stream();
    const talking = stream();
    pool.put(tunnel, 'k', failing);
    pool.put(tunnel, 'k', ending);
    pool.put(tunnel, 'k', talking);
    // With no listener of the pool's, this 'error' would throw and end the process.
    failing.emit('error', new Error('the session went away'));
    ending.push(null);
    talking.write('stray');
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        expect(pool.take(tunnel, 'k')).toBeUndefined();
        expect([failing.destroyed, ending.destroyed, talking.destroyed]).toEqual([
          true,
          true,
          true,
        ]);
        resolve();
      }),
    );
  });

  it('closes the idle streams of a tunnel that went offline', () => {
    const pool = new StreamPool();
    const s = stream();
    pool.put(tunnel, 'k', s);
    pool.retire(tunnel);
    expect(s.destroyed).toBe(true);
    expect(pool.take(tunnel, 'k')).toBeUndefined();
    // One given back later, by an exchange that ran while the tunnel went, is closed too.
    const late = stream();
    pool.put(tunnel, 'k', late);
    expect(late.destroyed).toBe(true);
    expect(pool.take(tunnel, 'k')).toBeUndefined();
  });

  it('closes a stream idle for longer than idleMs', async () => {
    const pool = new StreamPool({ idleMs: 20 });
    const s = stream();
    pool.put(tunnel, 'k', s);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(s.destroyed).toBe(true);
    expect(pool.take(tunnel, 'k')).toBeUndefined();
  });
});
