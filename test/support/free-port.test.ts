import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from './server-process.js';

describe('freePort', () => {
  it('never hands the same port out twice in a process, though each is free again at once', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
  });

  it('hands out a port a listener can bind', async () => {
    const port = await freePort();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    expect((server.address() as { port: number }).port).toBe(port);
    await new Promise((resolve) => server.close(resolve));
  });
});
