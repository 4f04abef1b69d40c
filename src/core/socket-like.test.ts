import { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { asSocket } from './socket-like.js';

describe('asSocket', () => {
  it("gives a stream the client's address and the socket methods it lacks", () => {
    const stream = asSocket(new PassThrough(), '[2001:db8::7]:45678');
    expect([stream.remoteAddress, stream.remotePort, stream.remoteFamily]).toEqual([
      '2001:db8::7',
      45678,
      'IPv6',
    ]);
    expect(stream.setNoDelay(true)).toBe(stream);
    expect(stream.ref()).toBe(stream);
  });

  it("keeps a real socket's own methods", () => {
    const socket = new Socket();
    expect(Object.hasOwn(asSocket(socket), 'setTimeout')).toBe(false);
    expect(Object.hasOwn(asSocket(new PassThrough()), 'setTimeout')).toBe(true);
    socket.destroy();
  });

  it("emits 'timeout' after the idle time, and data in between restarts it", async () => {
    const stream = asSocket(new PassThrough());
    let timedOut = 0;
    stream.setTimeout(40, () => timedOut++);
    stream.resume();
    await new Promise((resolve) => setTimeout(resolve, 25));
    stream.write('x');
    await new Promise((resolve) => setTimeout(resolve, 25));
    expect(timedOut).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(timedOut).toBe(1);
    stream.destroy();
  });
});
