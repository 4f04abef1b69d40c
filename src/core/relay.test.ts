import { Duplex } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { relay, type RelayTimeoutReason } from './relay.js';

/** A side of a relay the test drives: `push` is a byte from its peer, writes are kept. */
function side(): Duplex {
  return new Duplex({
    read() {},
    write(_chunk, _encoding, done) {
      done();
    },
  });
}

/** Let the streams' nextTick work (data events, ends) run. */
const settle = () => new Promise<void>((resolve) => process.nextTick(resolve));

describe('relay timeouts', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  function start() {
    const near = side();
    const far = side();
    const reasons: RelayTimeoutReason[] = [];
    relay(near, far, {
      timeouts: { idleMs: 1000, halfClosedMs: 300, onTimeout: (why) => reasons.push(why) },
    });
    return { near, far, reasons };
  }

  it('keeps a relay open while bytes flow either way, however long in all', async () => {
    const { near, far, reasons } = start();
    for (let i = 0; i < 10; i++) {
      (i % 2 ? near : far).push(Buffer.from('x'));
      await settle();
      vi.advanceTimersByTime(900);
    }
    expect(near.destroyed || far.destroyed).toBe(false);
    vi.advanceTimersByTime(100);
    expect(near.destroyed && far.destroyed).toBe(true);
    expect(reasons).toEqual(['idle']);
  });

  it('ends a half-closed relay after the shorter time, unless bytes still flow', async () => {
    const { near, far, reasons } = start();
    near.push(null); // the client's FIN
    await settle();
    vi.advanceTimersByTime(250);
    far.push(Buffer.from('the answer goes on'));
    await settle();
    vi.advanceTimersByTime(250);
    expect(near.destroyed || far.destroyed).toBe(false);
    vi.advanceTimersByTime(50);
    expect(near.destroyed && far.destroyed).toBe(true);
    expect(reasons).toEqual(['half_closed']);
  });

  it('stops watching once the relay closed', async () => {
    const { near, far, reasons } = start();
    near.destroy();
    far.destroy();
    await settle();
    vi.advanceTimersByTime(5000);
    expect(reasons).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
