import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { AgentStartupError } from './errors.js';
import { listenWebAddr, parseWebAddr } from './web-access.js';

describe('web_addr', () => {
  it('parses host:port, a port alone, localhost, false', () => {
    expect(parseWebAddr(undefined)).toEqual({ host: '127.0.0.1', port: 4040 });
    expect(parseWebAddr('4041')).toEqual({ host: '127.0.0.1', port: 4041 });
    expect(parseWebAddr('localhost:4100')).toEqual({ host: '127.0.0.1', port: 4100 });
    expect(parseWebAddr('[::1]:4100')).toEqual({ host: '::1', port: 4100 });
    expect(parseWebAddr('false')).toBe(false);
    expect(parseWebAddr(false)).toBe(false);
    expect(() => parseWebAddr('nowhere')).toThrow(/web_addr 'nowhere' must be host:port/);
  });

  it('moves past a taken port, and refuses a non-loopback address without a credential', async () => {
    const taken = http.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as { port: number }).port;
    const web = await listenWebAddr(
      (_q, s) => s.end(),
      `127.0.0.1:${port}`,
      { credential: undefined },
      () => undefined,
    );
    expect(web!.address).not.toBe(`127.0.0.1:${port}`);
    await web!.close();
    taken.close();
    await expect(
      listenWebAddr(
        () => undefined,
        false,
        { credential: undefined },
        () => undefined,
      ),
    ).resolves.toBeUndefined();
    await expect(
      listenWebAddr(
        () => undefined,
        '0.0.0.0:0',
        { credential: undefined },
        () => undefined,
      ),
    ).rejects.toBeInstanceOf(AgentStartupError);
    const warnings: string[] = [];
    const open = await listenWebAddr(
      () => undefined,
      '0.0.0.0:0',
      { credential: 'u:p' },
      (w) => warnings.push(w),
    );
    expect(warnings[0]).toMatch(/beyond this machine/);
    await open!.close();
  });
});
