/**
 * The one list of headers that belong to a connection or to a message's framing rather than to
 * the message (RFC 9110 §7.6.1, RFC 9112 §6). The ingress drops and sets them itself on each side;
 * policies may neither add nor remove them. Every layer reads these sets; none keeps its own.
 */

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection and are never forwarded as
 * they came. `Trailer` is end-to-end and not among them.
 * @example HOP_BY_HOP_HEADERS.has('keep-alive') // true
 */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Headers a traffic policy may not add or remove: the hop-by-hop ones, plus `Content-Length` and
 * `Trailer`, which frame the body the ingress relays (docs/traffic-policy.md lists them).
 * @example FRAMING_HEADERS.has('content-length') // true
 */
export const FRAMING_HEADERS: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  'content-length',
  'trailer',
]);
