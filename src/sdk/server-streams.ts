import {
  ErrorCode,
  type MuxSession,
  type MuxStream,
  StreamType,
  readMessage,
  readProxyHeader,
  writeReply,
} from '../protocol/index.js';
import type { Endpoint } from './endpoints.js';
import { BurrowAgentError } from './errors.js';
import { RPC_TIMEOUT_MS } from './options.js';

/** What the streams the server opens need from the session. */
export interface ServerStreamHost {
  /** The endpoint bound with this id (waiting for binds in flight). */
  endpointFor(id: string): Promise<Endpoint | undefined>;
  /** The server asked to stop or restart; called once the answer is on its way. */
  onCommand(which: 'stop' | 'restart', mux: MuxSession): void;
  /** The server stopped the endpoint with this bind id. */
  onStopTunnel(id: string, error: BurrowAgentError): void;
}

/**
 * Serve one stream the server opened (docs/protocol.md §5.1): proxied connections (3), the
 * Restart (4) and Stop (5) commands, Update (6, refused: the SDK does not update itself) and
 * StopTunnel (9). Any other type is refused.
 * @example typed.on('stream', (stream, type) => serveServerStream(session, mux, stream, type));
 */
export function serveServerStream(
  host: ServerStreamHost,
  mux: MuxSession,
  stream: MuxStream,
  type: number,
): void {
  stream.on('error', () => {
    // Resets by the edge are normal (the public client left); forwarding reacts to 'close'.
  });
  switch (type) {
    case StreamType.Proxy:
      void acceptProxy(host, stream);
      return;
    case StreamType.Restart:
      void command(host, mux, stream, 'restart');
      return;
    case StreamType.Stop:
      void command(host, mux, stream, 'stop');
      return;
    case StreamType.Update:
      writeReply(stream, { Error: 'the Burrow SDK does not update itself' });
      return;
    case StreamType.StopTunnel:
      void stopTunnel(host, stream);
      return;
    default:
      stream.reset(ErrorCode.StreamRefused);
  }
}

async function acceptProxy(host: ServerStreamHost, stream: MuxStream): Promise<void> {
  let header;
  try {
    header = await readProxyHeader(stream, RPC_TIMEOUT_MS);
  } catch {
    stream.reset(ErrorCode.Protocol);
    return;
  }
  const endpoint = await host.endpointFor(header.Id);
  if (!endpoint) stream.reset(ErrorCode.StreamRefused);
  else endpoint.accept(stream, header);
}

async function command(
  host: ServerStreamHost,
  mux: MuxSession,
  stream: MuxStream,
  which: 'stop' | 'restart',
): Promise<void> {
  try {
    await readMessage(stream, undefined, { timeoutMs: RPC_TIMEOUT_MS });
  } catch {
    stream.reset(ErrorCode.Protocol);
    return;
  }
  writeReply(stream, { Error: '' });
  // Let the answer reach the edge before acting on it.
  const act = (): void => host.onCommand(which, mux);
  if (stream.writableFinished) act();
  else stream.once('finish', act);
}

async function stopTunnel(host: ServerStreamHost, stream: MuxStream): Promise<void> {
  let message;
  try {
    message = await readMessage(stream, 'StopTunnel', { timeoutMs: RPC_TIMEOUT_MS });
  } catch {
    stream.reset(ErrorCode.Protocol);
    return;
  }
  stream.resume();
  const code =
    typeof message.ErrorCode === 'string' && message.ErrorCode !== ''
      ? message.ErrorCode
      : undefined;
  host.onStopTunnel(
    String(message.Id),
    new BurrowAgentError(message.Message || 'the server stopped the endpoint', code),
  );
}
