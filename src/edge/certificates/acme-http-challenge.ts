/** Finds the key authorization published for an HTTP-01 token (undefined: none pending). */
export type AcmeChallengeLookup = (token: string) => Promise<string | undefined>;

/** Where HTTP-01 challenges are asked (RFC 8555 §8.3). */
export const ACME_CHALLENGE_PATH = '/.well-known/acme-challenge/';
/** Tokens are base64url (RFC 8555 §8.3); anything else is not worth a store lookup. */
const TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

/** The answer to an ACME HTTP-01 validation request. */
export interface AcmeAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function acmeReply(status: number, body: string): AcmeAnswer {
  return { status, headers: { 'content-type': 'text/plain', 'cache-control': 'no-store' }, body };
}

/**
 * The answer to an ACME HTTP-01 validation request (`method` and origin-form `target`), or
 * undefined when the request is not one. It comes before any routing or policy: the CA must reach
 * the answer whatever tunnel (or none) serves the name.
 * @example const answer = acmeChallengeAnswer('GET', '/.well-known/acme-challenge/abc', lookup);
 */
export function acmeChallengeAnswer(
  method: string,
  target: string,
  lookup: AcmeChallengeLookup | undefined,
): Promise<AcmeAnswer> | undefined {
  if (
    !lookup ||
    !target.startsWith(ACME_CHALLENGE_PATH) ||
    (method !== 'GET' && method !== 'HEAD')
  ) {
    return undefined;
  }
  const token = target.slice(ACME_CHALLENGE_PATH.length);
  if (!TOKEN.test(token)) return Promise.resolve(acmeReply(404, 'no such ACME challenge\n'));
  return lookup(token).then(
    (answer) =>
      answer === undefined ? acmeReply(404, 'no such ACME challenge\n') : acmeReply(200, answer),
    () => acmeReply(503, 'the ACME challenge store is unavailable; the CA will retry\n'),
  );
}
