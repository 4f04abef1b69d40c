/**
 * The raw TCP services ingress tests relay to: one that echoes, one that counts what it got.
 */
import { startTcpUpstream, type LocalServer } from './ingress.js';

/**
 * Echoes every byte back; a connection that fails is closed.
 * @example const echo = await startEchoUpstream(); fakeTunnel({ proto: 'tcp', port, upstreamPort: echo.port });
 */
export function startEchoUpstream(): Promise<LocalServer> {
  return startTcpUpstream((socket) => {
    socket.pipe(socket);
    socket.on('error', () => socket.destroy());
  });
}

/**
 * Answers `received <n>` (the bytes it read) only after the client's FIN: proves that a
 * half-close travels through the relay, and the answer back.
 * @example const counter = await startCountingUpstream();
 */
export function startCountingUpstream(): Promise<LocalServer> {
  return startTcpUpstream((socket) => {
    let bytes = 0;
    socket.on('data', (c: Buffer) => (bytes += c.length));
    socket.on('end', () => socket.end(`received ${bytes}`));
  });
}
