/**
 * Answers of the HTTP ingress: an error page in place of an upstream response, and an upstream
 * response streamed back to the public client with its trailers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable, Transform } from 'node:stream';
import { headersProblem, isReasonPhrase } from '../../../core/http-wire.js';
import { INGRESS_ERRORS, sendErrorPage, type IngressError } from '../error-pages.js';
import { routingHost } from './http-forwarding.js';

/**
 * An upstream response as the full path relays it: Node's IncomingMessage read from an HTTP/1.1
 * tunnel stream, or an HTTP/2 answer with the same fields (h2-upstream.ts).
 */
export type UpstreamResponse = Readable &
  Pick<
    IncomingMessage,
    'statusCode' | 'statusMessage' | 'headers' | 'rawHeaders' | 'rawTrailers' | 'complete'
  >;

/**
 * Answer with an error page, discarding what is left of the request body.
 * @example failRequest(req, res, INGRESS_ERRORS.tunnelUnreachable, 'ECONNRESET');
 */
export function failRequest(
  req: IncomingMessage,
  res: ServerResponse,
  error: IngressError,
  detail: string,
): void {
  // Nobody will read the rest of the body now; drop it so the answer gets through.
  if (!req.complete) req.resume();
  sendErrorPage(req, res, error, routingHost(req.headers.host) ?? '', detail);
}

/**
 * Write the upstream response `up` with `headers`, its body through `transforms` in order (a
 * find-replace rewrite, a compress-response encoder) when given. An
 * agent's answer Node will not repeat becomes a 502 page; one cut off mid-body breaks the
 * client's response rather than ending it short.
 * @example writeUpstreamResponse(req, res, up, forwardResponseHeaders(up), undefined);
 */
export function writeUpstreamResponse(
  req: IncomingMessage,
  res: ServerResponse,
  up: UpstreamResponse,
  headers: string[],
  transforms: readonly Transform[] | undefined,
): void {
  if (res.destroyed) {
    up.destroy();
    return;
  }
  try {
    // writeHead refuses (throws) a header name, header value or reason phrase that is not
    // writable as it is, by the same rules as core/http-wire.ts, before anything is written: what
    // on_http_response added and the agent's reason phrase are checked there, once.
    res.writeHead(up.statusCode ?? 502, up.statusMessage, headers);
  } catch (err) {
    up.destroy();
    // A control character is answered as such; anything else Node will not repeat (a status
    // outside 100-999, say) is the agent's fault.
    const problem = isReasonPhrase(up.statusMessage ?? '')
      ? headersProblem(headers)
      : 'a control character in the reason phrase';
    if (problem) failRequest(req, res, INGRESS_ERRORS.unsafeResponseHead, problem);
    else failRequest(req, res, INGRESS_ERRORS.tunnelUnreachable, (err as Error).message);
    return;
  }
  up.once('end', () => {
    const trailers = up.rawTrailers;
    if (trailers.length === 0) return;
    const pairs: [string, string][] = [];
    for (let i = 0; i < trailers.length; i += 2) pairs.push([trailers[i]!, trailers[i + 1]!]);
    res.addTrailers(pairs);
  });
  up.once('close', () => {
    // Cut off mid-body by the agent: the client must see a broken response, not a short one.
    if (!up.complete) res.destroy();
  });
  let body: Readable = up;
  for (const transform of transforms ?? []) {
    transform.once('error', () => res.destroy());
    body = body.pipe(transform);
  }
  body.pipe(res);
}
