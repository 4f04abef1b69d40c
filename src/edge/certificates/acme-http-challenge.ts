import type { IncomingMessage, ServerResponse } from 'node:http';

/** Finds the key authorization published for an HTTP-01 token (undefined: none pending). */
export type AcmeChallengeLookup = (token: string) => Promise<string | undefined>;

/** Where HTTP-01 challenges are asked (RFC 8555 §8.3). */
export const ACME_CHALLENGE_PATH = '/.well-known/acme-challenge/';
/** Tokens are base64url (RFC 8555 §8.3); anything else is not worth a store lookup. */
const TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

/**
 * Answer an ACME HTTP-01 validation request, before any routing or policy: the CA must reach the
 * answer whatever tunnel (or none) serves the name. Returns false when `req` is not one, so the
 * caller routes it as usual.
 * @example if (answerAcmeChallenge(req, res, lookup)) return;
 */
export function answerAcmeChallenge(
  req: IncomingMessage,
  res: ServerResponse,
  lookup: AcmeChallengeLookup | undefined,
): boolean {
  const url = req.url ?? '';
  if (
    !lookup ||
    !url.startsWith(ACME_CHALLENGE_PATH) ||
    (req.method !== 'GET' && req.method !== 'HEAD')
  ) {
    return false;
  }
  const token = url.slice(ACME_CHALLENGE_PATH.length);
  const reply = (status: number, body: string): void => {
    if (res.destroyed) return;
    res.writeHead(status, {
      'content-type': 'text/plain',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  if (!TOKEN.test(token)) {
    reply(404, 'no such ACME challenge\n');
    return true;
  }
  lookup(token).then(
    (answer) =>
      answer === undefined ? reply(404, 'no such ACME challenge\n') : reply(200, answer),
    () => reply(503, 'the ACME challenge store is unavailable; the CA will retry\n'),
  );
  return true;
}
