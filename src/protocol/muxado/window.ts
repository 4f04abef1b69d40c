/**
 * muxado has no window negotiation: both ends assume the same per-stream window. Third-party
 * agents offer no ALPN and know only the 256 KiB default; our own SDK offers ALPN `burrow/1`, and
 * then both ends use a larger window, which is what bulk throughput needs on real round-trip
 * times (throughput per stream <= window / RTT).
 */

/** The muxado default and the only window third-party agents know: 256 KiB per stream. */
export const DEFAULT_WINDOW = 0x40000;
/** ALPN our own SDK offers; both ends then use BURROW_WINDOW instead of the default. */
export const BURROW_ALPN = 'burrow/1';
/** Per-stream window between Burrow peers: 4 MiB, ~320 Mbit/s per stream at 100 ms RTT. */
export const BURROW_WINDOW = 4 * 1024 * 1024;

/**
 * The per-stream window for a TLS connection, by its negotiated ALPN protocol.
 * @example new MuxSession(tlsSocket, { role: 'server', window: windowForAlpn(tlsSocket.alpnProtocol) })
 */
export function windowForAlpn(alpn: string | false | null | undefined): number {
  return alpn === BURROW_ALPN ? BURROW_WINDOW : DEFAULT_WINDOW;
}
