import { quote } from '../../core/quote.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ActionSpec, Terminal } from './types.js';

const digest = (text: string | Buffer): Buffer => createHash('sha256').update(text).digest();

/** What an Authorization header presented: whether Basic credentials, whose, and accepted. */
interface BasicAuthCheck {
  presented: boolean;
  username: string;
  authorized: boolean;
}

/**
 * Whether the `Authorization` header `header` carries one of `accepted` (SHA-256 digests of
 * `user:password`), and whether it presented Basic credentials at all, and whose. Every candidate
 * is compared in constant time and none is skipped, so timing reveals neither which user exists
 * nor how much of a password matched.
 */
function basicAuthCheck(header: string | undefined, accepted: readonly Buffer[]): BasicAuthCheck {
  const m = header === undefined ? null : /^\s*basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  const decoded = m ? Buffer.from(m[1]!, 'base64') : Buffer.alloc(0);
  const given = digest(decoded);
  let ok = false;
  for (const candidate of accepted) ok = timingSafeEqual(given, candidate) || ok;
  const text = decoded.toString('utf8');
  const colon = text.indexOf(':');
  return {
    presented: m !== null,
    username: m !== null && colon > 0 ? text.slice(0, colon) : '',
    authorized: ok && m !== null,
  };
}

/**
 * `basic-auth`: require HTTP Basic credentials from `credentials` (1–10 `user:password`
 * strings; passwords 8–128 characters). Without a matching `Authorization` header the client
 * gets 401 with `WWW-Authenticate: Basic realm="<realm>"` (realm default `burrow`). The header is
 * passed upstream unchanged. With `enforce: false` the request goes on either way (an
 * `would-unauthorize` event records a refusal), and later rules decide from
 * `actions.ngrok.basic_auth.credentials.{presented,username,authorized}`.
 * @example { type: 'basic-auth', config: { realm: 'staging', credentials: ['alice:correct-horse'] } }
 */
export const basicAuthAction: ActionSpec = {
  type: 'basic-auth',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['credentials', 'realm', 'enforce'],
  compile(config) {
    const credentials = config.stringList('credentials', {
      min: 1,
      max: 10,
      required: true,
      example: '["alice:correct-horse"]',
    })!;
    const accepted = credentials.map((pair, i) => {
      const colon = pair.indexOf(':');
      const user = colon < 0 ? '' : pair.slice(0, colon);
      const password = colon < 0 ? '' : pair.slice(colon + 1);
      if (user === '')
        config.fail(`credentials[${i}]`, 'must be "user:password" with a non-empty user');
      if (password.length < 8 || password.length > 128) {
        config.fail(
          `credentials[${i}]`,
          `must have a password of 8 to 128 characters (user ${quote(user, '"')})`,
        );
      }
      return digest(pair);
    });
    const realm = config.string('realm') ?? 'burrow';
    if (!/^[\x20-\x7e]*$/.test(realm) || realm.includes('"') || realm.includes('\\')) {
      config.fail('realm', 'must be printable ASCII without quotes or backslashes');
    }
    const enforce = config.boolean('enforce') ?? true;
    const refusal: Terminal = Object.freeze({
      kind: 'respond',
      status: 401,
      headers: Object.freeze({ 'www-authenticate': `Basic realm="${realm}", charset="UTF-8"` }),
      body: '',
    });
    return {
      alwaysTerminates: false,
      run(c) {
        const header = c.activation.req!.header('authorization')[0];
        const check = basicAuthCheck(header, accepted);
        c.setActionResult('basic_auth', { credentials: { ...check } });
        if (check.authorized) return undefined;
        const why = check.presented ? 'credentials refused' : 'no credentials given';
        if (!enforce) {
          c.event('would-unauthorize', `${why} (enforce is false: let through)`);
          return undefined;
        }
        c.event('unauthorized', why);
        return refusal;
      },
    };
  },
};
