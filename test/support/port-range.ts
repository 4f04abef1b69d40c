import { once } from 'node:events';
import { createServer, type Server } from 'node:net';

/**
 * `count` consecutive ports that are free on 127.0.0.1 now, for a server's `--tcp-ports`: the
 * first of them, chosen at random in `[region.from, region.to)`. Every port of the range is
 * probed with a real listener (closed again at once). A test file that gives its server such a
 * range of its own, in a region no other file uses, keeps its reserved addresses off the ports of
 * the servers other files run at the same time (they all share the default 20000-20999, and each
 * hands out its lowest free port first). Keep regions below Linux's ephemeral ports (32768 up),
 * where client sockets and `freePort()` listeners land.
 * @example const first = await freePortRange(4, { from: 10_000, to: 20_000 });
 */
export async function freePortRange(
  count: number,
  region: { from: number; to: number },
): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = region.from + Math.floor(Math.random() * (region.to - region.from - count + 1));
    const servers: Server[] = [];
    try {
      for (let port = first; port < first + count; port++) {
        const server = createServer();
        servers.push(server);
        server.listen(port, '127.0.0.1');
        await once(server, 'listening');
      }
      return first;
    } catch {
      // One was taken: try another range.
    } finally {
      for (const server of servers) server.close();
    }
  }
  throw new Error(`no ${count} free consecutive ports in ${region.from}-${region.to - 1}`);
}
