import { LRUCache } from 'lru-cache';
import { createRemoteJWKSet, type JWSHeaderParameters, type FlattenedJWSInput } from 'jose';
import { checkEgressUrl, egressAgent, egressFetch } from '../../core/egress-guard.js';

/**
 * Where jwt-validation finds signing keys: JWKS URLs, fetched on first use, cached, and fetched
 * again when a token names a key id the cached set lacks (a rotation), at most once per cooldown.
 * An issuer without configured URLs is asked for its discovery document (`jwks_uri`).
 */

type KeyResolver = ReturnType<typeof createRemoteJWKSet>;
type ResolvedKey = Awaited<ReturnType<KeyResolver>>;

/**
 * How long a fetched set is trusted before it is fetched again, the least time between two
 * fetches (so tokens with made-up key ids cannot make the edge hammer the issuer), and how long a
 * fetch may take. Read when a URL is first used; tests shorten the cooldown.
 */
export const JWKS_CACHE = { maxAgeMs: 10 * 60_000, cooldownMs: 30_000, timeoutMs: 5_000 };

/** JWKS URLs, and issuers asked for theirs, remembered; past it the least recently used goes. */
const MAX_ENTRIES = 256;

const sets = new LRUCache<string, KeyResolver>({ max: MAX_ENTRIES });

/**
 * One resolver per URL for the whole process, so every policy naming it shares the cache. Its
 * fetches go through the egress guard: an address in the URL is checked on each use (jose's
 * request does no lookup for it), a name when its socket resolves it.
 */
function remoteSet(url: string): KeyResolver {
  const parsed = new URL(url);
  checkEgressUrl(parsed);
  let set = sets.get(url);
  if (!set) {
    set = createRemoteJWKSet(parsed, {
      cacheMaxAge: JWKS_CACHE.maxAgeMs,
      cooldownDuration: JWKS_CACHE.cooldownMs,
      timeoutDuration: JWKS_CACHE.timeoutMs,
      agent: egressAgent(parsed.protocol),
    });
    sets.set(url, set);
  }
  return set;
}

const discovered = new LRUCache<string, Promise<string>>({ max: MAX_ENTRIES });

/** The `jwks_uri` of `issuer`'s discovery document (cached like a key set). */
function discoverJwks(issuer: string): Promise<string> {
  const hit = discovered.get(issuer);
  if (hit) return hit;
  const url = (async () => {
    const where = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const res = await egressFetch(where, { signal: AbortSignal.timeout(JWKS_CACHE.timeoutMs) });
    if (!res.ok) throw new Error(`${where} answered ${res.status}`);
    const doc = (await res.json()) as { jwks_uri?: unknown };
    if (typeof doc.jwks_uri !== 'string') throw new Error(`${where} has no jwks_uri`);
    return doc.jwks_uri;
  })();
  url.catch(() => discovered.delete(issuer));
  discovered.set(issuer, url, { ttl: JWKS_CACHE.maxAgeMs });
  return url;
}

/**
 * A key resolver for jose's jwtVerify over several JWKS URLs: the first set holding a key that
 * fits the token's header wins. With no URLs, the token's issuer (already checked against the
 * allow list by the caller) is asked for its own.
 * @example const keys = keyResolver(['https://issuer.example/jwks.json']); await jwtVerify(token, keys, { algorithms: ['RS256'] });
 */
export function keyResolver(
  urls: readonly string[],
): (
  header: JWSHeaderParameters,
  token: FlattenedJWSInput,
  issuer?: string,
) => Promise<ResolvedKey> {
  return async (header, token, issuer) => {
    const list = urls.length > 0 ? urls : issuer ? [await discoverJwks(issuer)] : [];
    let last: unknown = new Error('no JWKS URL is configured and the token names no issuer');
    for (const url of list) {
      try {
        return await remoteSet(url)(header, token);
      } catch (err) {
        last = err;
      }
    }
    throw last;
  };
}
