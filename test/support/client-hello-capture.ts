/**
 * Real ClientHellos for TLS parser tests: a local TCP listener that keeps the first bytes a Node
 * TLS client sends (its ClientHello record) and closes the connection.
 */
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { connect, type ConnectionOptions } from 'node:tls';

export interface HelloCapture {
  /** The ClientHello record of a Node TLS client connecting with `options` (SNI, versions). */
  capture(options?: ConnectionOptions): Promise<Buffer>;
  close(): void;
}

/**
 * @example
 * const hellos = await startHelloCapture();
 * const hello = await hellos.capture({ servername: 'app.burrow.test' });
 */
export async function startHelloCapture(): Promise<HelloCapture> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    async capture(options = {}) {
      const captured = once(server, 'connection').then(async ([socket]) => {
        const [chunk] = (await once(socket as NodeJS.EventEmitter, 'data')) as [Buffer];
        (socket as Socket).destroy();
        return chunk;
      });
      const client = connect({ ...options, host: '127.0.0.1', port });
      client.on('error', () => undefined);
      const hello = await captured;
      client.destroy();
      return hello;
    },
    close: () => server.close(),
  };
}
