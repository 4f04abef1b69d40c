/**
 * The agent protocol: muxado framing and multiplexing, typed streams and heartbeat, and the tunnel
 * RPC messages. Symmetric: the edge uses it with role 'server', the SDK with role 'client'.
 *
 * @example
 * const session = new MuxSession(tlsSocket, { role: 'server', window: windowForAlpn(tlsSocket.alpnProtocol) });
 * const typed = new TypedSession(session); // answers heartbeats
 * typed.on('stream', async (stream, type) => {
 *   if (type === StreamType.Auth) writeReply(stream, await authenticate(await readMessage(stream, 'Auth')));
 * });
 */
export * from './muxado/frame.js';
export * from './muxado/errors.js';
export * from './muxado/accept-queue.js';
export * from './muxado/stream.js';
export * from './muxado/session.js';
export * from './muxado/window.js';
export * from './muxado/slab-reads.js';
export * from './tunnel/json-scanner.js';
export * from './tunnel/reader.js';
export * from './tunnel/typed.js';
export * from './tunnel/messages.js';
export * from './tunnel/proxy-header.js';
export * from './tunnel/rpc.js';
export * from './tunnel/field-limits.js';
export * from './tunnel/byte-budget.js';
