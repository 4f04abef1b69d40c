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
export * from './frame.js';
export * from './errors.js';
export * from './accept-queue.js';
export * from './stream.js';
export * from './session.js';
export * from './window.js';
export * from './slab-reads.js';
export * from './json-scanner.js';
export * from './reader.js';
export * from './typed.js';
export * from './messages.js';
export * from './proxy-header.js';
export * from './rpc.js';
