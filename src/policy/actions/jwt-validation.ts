import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import { LRUCache } from 'lru-cache';
import { CODES } from '../../core/errors.js';
import { quote } from '../../core/quote.js';
import { cookieValues } from './auth-cookies.js';
import { isMapping, type ConfigReader, type Mapping } from './config.js';
import { keyResolver } from './jwt-keys.js';
import type { ActionSpec, CompiledAction, PhaseContext, Terminal } from './types.js';

/** Signature algorithms a JWKS can carry keys for; `none` and shared-secret HS* are never taken. */
const ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;

/** Verified tokens kept per action, and for how long (ms). */
const VERIFIED_MAX = 10_000;
const VERIFIED_TTL_MS = 60_000;

/**
 * The token types ngrok names: any JWT (`jwt`, `access_token`, `id_token`, `it+jwt`), or an
 * RFC 9068 access token (`at+jwt`), whose header must then say `typ: at+jwt`.
 */
const TOKEN_TYPES = ['jwt', 'access_token', 'at+jwt', 'id_token', 'it+jwt'] as const;
type TokenType = (typeof TOKEN_TYPES)[number];

/**
 * Where a token is read: a header (with a prefix such as `Bearer `), a cookie, or a field of the
 * request body (a form or a JSON object: ngrok's `method: body`, e.g. an `_id_token` a login
 * form posts).
 */
interface TokenSource {
  type: TokenType;
  method: 'header' | 'cookie' | 'body';
  name: string;
  prefix: string;
  /** `prefix` lowercased once, for the case-insensitive header match. */
  lowerPrefix: string;
}

/** A nested mapping at `path`, or a refusal naming it (with `example` of what to write). */
function section(
  config: ConfigReader,
  path: string,
  value: unknown,
  required: boolean,
  example: string,
): Mapping {
  if (value === undefined || value === null) {
    if (required) config.fail(path, `is required, e.g. ${example}`);
    return {};
  }
  if (!isMapping(value)) return config.fail(path, `must be a mapping, e.g. ${example}`);
  return value;
}

/** `allow_list: [{value: …}, …]` as strings. */
function allowList(
  config: ConfigReader,
  path: string,
  value: unknown,
  required: boolean,
): string[] {
  const list = section(config, path, value, required, '{allow_list: [{value: "…"}]}').allow_list;
  if (list === undefined || list === null) {
    if (required) config.fail(`${path}.allow_list`, 'must list at least one {value: …}');
    return [];
  }
  if (!Array.isArray(list)) return config.fail(`${path}.allow_list`, 'must be a list');
  const out = list.map((item: unknown, i) => {
    const v = isMapping(item) ? item.value : item;
    if (typeof v !== 'string' || v === '') {
      return config.fail(`${path}.allow_list[${i}]`, 'must be {value: "<text>"}');
    }
    return v;
  });
  if (required && out.length === 0)
    config.fail(`${path}.allow_list`, 'must list at least one value');
  return out;
}

const TOKEN_EXAMPLE = '{type: jwt, method: header, name: Authorization, prefix: "Bearer "}';
const TOKENS_EXAMPLE = `[${TOKEN_EXAMPLE}]`;
const HTTP_EXAMPLE = `{tokens: ${TOKENS_EXAMPLE}}`;
const JKUS_EXAMPLE = '{sources: {additional_jkus: ["https://…/jwks.json"]}}';

function tokenSources(config: ConfigReader): TokenSource[] {
  const http = section(config, 'http', config.value('http'), true, HTTP_EXAMPLE);
  const tokens = http.tokens;
  if (!Array.isArray(tokens) || tokens.length === 0) {
    return config.fail(
      'http.tokens',
      `must list at least one token source, e.g. ${TOKENS_EXAMPLE}`,
    );
  }
  return tokens.map((t: unknown, i) => {
    const at = `http.tokens[${i}]`;
    if (!isMapping(t)) return config.fail(at, `must be a mapping, e.g. ${TOKEN_EXAMPLE}`);
    const type = t.type ?? 'jwt';
    if (!(TOKEN_TYPES as readonly unknown[]).includes(type))
      config.fail(`${at}.type`, `must be one of ${TOKEN_TYPES.join(', ')}`);
    const method = t.method ?? 'header';
    if (method !== 'header' && method !== 'cookie' && method !== 'body')
      config.fail(`${at}.method`, 'must be header, cookie or body');
    if (typeof t.name !== 'string' || t.name === '')
      config.fail(`${at}.name`, 'must name the header, cookie or body field');
    const prefix = t.prefix ?? '';
    if (typeof prefix !== 'string') config.fail(`${at}.prefix`, 'must be a string');
    return {
      type: type as TokenType,
      method,
      name: t.name,
      prefix,
      lowerPrefix: prefix.toLowerCase(),
    };
  });
}

/** A found token and the source that had it. */
interface FoundToken {
  token: string;
  source: TokenSource;
}

/** The first token any source finds; reads the body only when a body source is reached. */
async function findToken(
  c: PhaseContext,
  sources: readonly TokenSource[],
): Promise<FoundToken | undefined> {
  const req = c.activation.req!;
  for (const s of sources) {
    let token: string | undefined;
    if (s.method === 'header') {
      for (const value of req.header(s.name)) {
        if (s.prefix === '') token = value.trim();
        else if (value.slice(0, s.prefix.length).toLowerCase() === s.lowerPrefix)
          token = value.slice(s.prefix.length).trim();
        if (token !== undefined) break;
      }
    } else if (s.method === 'cookie') {
      const v = cookieValues(req.header('cookie'), s.name)[0];
      if (v !== undefined) token = v.startsWith(s.prefix) ? v.slice(s.prefix.length) : v;
    } else {
      const v = bodyField(
        await c.requestBody().catch(() => undefined),
        req.content_type.mediaType,
        s.name,
      );
      if (v !== undefined) token = v.startsWith(s.prefix) ? v.slice(s.prefix.length) : v;
    }
    if (token !== undefined) return { token, source: s };
  }
  return undefined;
}

/** Field `name` of a form (`application/x-www-form-urlencoded`) or JSON object body, as text. */
function bodyField(
  body: Buffer | undefined,
  contentType: string,
  name: string,
): string | undefined {
  if (!body || body.length === 0) return undefined;
  const text = body.toString('utf8');
  if (contentType === 'application/json' || contentType.endsWith('+json')) {
    try {
      const parsed: unknown = JSON.parse(text);
      const v = isMapping(parsed) ? parsed[name] : undefined;
      return typeof v === 'string' ? v : undefined;
    } catch {
      return undefined;
    }
  }
  return new URLSearchParams(text).get(name) ?? undefined;
}

/** The `typ` of a token's header, or undefined when it cannot be read. */
function typOf(token: string): unknown {
  try {
    return decodeProtectedHeader(token).typ;
  } catch {
    return undefined;
  }
}

/** RFC 9068: `at+jwt`, also written `application/at+jwt`, in any case. */
function isAccessTokenType(typ: unknown): boolean {
  return typeof typ === 'string' && /^(application\/)?at\+jwt$/i.test(typ);
}

/** JSON claims as CEL values: whole numbers become ints, so `claims.exp > 0` type-checks at run time. */
function celValue(v: unknown): unknown {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (Array.isArray(v)) return v.map(celValue);
  if (isMapping(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, celValue(x)]));
  return v;
}

/** Why a token was refused: what the client is told, and what the operator's event says. */
interface Problem {
  visitor: string;
  detail: string;
}

const problem = (reason: string): Problem => ({ visitor: reason, detail: reason });

/**
 * What a client is told when the keys could not be fetched or used, whatever the reason: the key
 * URL is the policy author's choice, so the reason (refused, unreachable, not JSON, not a key
 * set) would tell an authtoken holder what listens at an address the edge can reach.
 */
const KEYS_UNAVAILABLE = `the issuer's signing keys could not be fetched (${CODES.egressFailed})`;

/** Why jose refused a token, in words a client can act on; a failed key fetch only as such. */
function problemOf(err: unknown): Problem {
  if (err instanceof joseErrors.JWTExpired) return problem('the token has expired');
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    return problem(`claim ${err.claim} is not acceptable (${err.reason})`);
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed)
    return problem('the token uses an algorithm that is not allowed');
  if (err instanceof joseErrors.JWSSignatureVerificationFailed)
    return problem('the signature does not verify');
  if (err instanceof joseErrors.JWKSNoMatchingKey)
    return problem('no signing key of the issuer matches the token');
  if (err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JWSInvalid)
    return problem('the token is malformed');
  const message = err instanceof Error ? err.message : String(err);
  return { visitor: KEYS_UNAVAILABLE, detail: `the signing keys could not be fetched: ${message}` };
}

function refusal(reason: string): Terminal {
  const description = reason.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, '?');
  return {
    kind: 'respond',
    status: 401,
    headers: {
      'www-authenticate': `Bearer error="invalid_token", error_description="${description}"`,
    },
    body: '',
  };
}

/**
 * `jwt-validation`: requires a JWT (from the `http.tokens` sources: headers with a prefix,
 * cookies, or a field of a form or JSON body; the first source that has one is used) signed with one of `jws.allowed_algorithms` by a key of `jws.keys.sources.additional_jkus`
 * (or the issuer's discovered JWKS), issued by one of `issuer.allow_list`, for one of
 * `audience.allow_list` (when given), within its `exp`/`nbf` give or take `lifetime.clock_skew`
 * (default 30s). Refused: 401 with `WWW-Authenticate: Bearer error="invalid_token"`. Accepted:
 * `actions.ngrok.jwt_validation.claims` (and `.tokens[0].claims`, `.tokens[0].header`) for later rules.
 * @example { type: 'jwt-validation', config: { issuer: { allow_list: [{ value: 'https://id.example' }] }, audience: { allow_list: [{ value: 'api' }] }, http: { tokens: [{ type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' }] }, jws: { allowed_algorithms: ['RS256'], keys: { sources: { additional_jkus: ['https://id.example/jwks.json'] } } } } }
 */
export const jwtValidationAction: ActionSpec = {
  type: 'jwt-validation',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['issuer', 'audience', 'http', 'jws', 'lifetime', 'enforce'],
  compile(config) {
    const issuers = allowList(config, 'issuer', config.value('issuer'), true);
    const audiences = allowList(config, 'audience', config.value('audience'), false);
    const sources = tokenSources(config);
    const jws = section(config, 'jws', config.value('jws'), true, '{allowed_algorithms: [RS256]}');
    const algs = jws.allowed_algorithms;
    if (!Array.isArray(algs) || algs.length === 0) {
      config.fail('jws.allowed_algorithms', `must list at least one of ${ALGORITHMS.join(', ')}`);
    }
    for (const alg of algs as unknown[]) {
      if (!(ALGORITHMS as readonly unknown[]).includes(alg)) {
        config.fail(
          'jws.allowed_algorithms',
          `may only hold ${ALGORITHMS.join(', ')}, not ${quote(String(alg), '"')} (unsigned and shared-secret tokens are never accepted)`,
        );
      }
    }
    const keys = section(config, 'jws.keys', jws.keys, false, JKUS_EXAMPLE);
    const jkus =
      section(
        config,
        'jws.keys.sources',
        keys.sources,
        false,
        '{additional_jkus: ["https://…/jwks.json"]}',
      ).additional_jkus ?? [];
    if (!Array.isArray(jkus))
      return config.fail('jws.keys.sources.additional_jkus', 'must be a list of URLs');
    for (const [i, url] of (jkus as unknown[]).entries()) {
      if (typeof url !== 'string' || !/^https?:\/\/[^\s]+$/.test(url) || !URL.canParse(url)) {
        config.fail(`jws.keys.sources.additional_jkus[${i}]`, 'must be an http(s) URL of a JWKS');
      }
    }
    const lifetime = section(
      config,
      'lifetime',
      config.value('lifetime'),
      false,
      '{clock_skew: 30s}',
    );
    const skewMs =
      config.durationAt('lifetime.clock_skew', lifetime.clock_skew, {
        min: 0,
        max: 600_000,
        range: '0s to 10m',
        example: '"30s"',
      }) ?? 30_000;
    const enforce = config.boolean('enforce') ?? true;
    const resolve = keyResolver(jkus as string[]);
    const options = {
      algorithms: algs as string[],
      issuer: issuers,
      ...(audiences.length > 0 ? { audience: audiences } : {}),
      clockTolerance: Math.round(skewMs / 1000),
      requiredClaims: ['exp'],
    };

    // Tokens verified in the last minute, so a client's every request does not pay a signature
    // check; `exp` is still checked on each use, and a key dropped from the JWKS stops being
    // honoured within VERIFIED_TTL_MS.
    const verified = new LRUCache<string, { claims: Mapping; header: unknown; exp: number }>({
      max: VERIFIED_MAX,
      ttl: VERIFIED_TTL_MS,
    });
    const verify = async (c: PhaseContext): Promise<Problem | undefined> => {
      const found = await findToken(c, sources);
      if (found === undefined) return problem('no token was sent');
      const { token } = found;
      if (found.source.type === 'at+jwt' && !isAccessTokenType(typOf(token))) {
        return problem('the token is not an access token (its header typ is not at+jwt)');
      }
      const known = verified.get(token);
      if (known && c.now() < known.exp * 1000 + skewMs) {
        c.setActionResult('jwt_validation', {
          claims: known.claims,
          tokens: [{ claims: known.claims, header: known.header }],
        });
        return undefined;
      }
      let issuer: string | undefined;
      try {
        const header = decodeProtectedHeader(token);
        if (typeof header.alg !== 'string' || !options.algorithms.includes(header.alg)) {
          return problem(`the token's algorithm ${quote(String(header.alg), '"')} is not allowed`);
        }

        issuer = decodeJwt(token).iss;
      } catch {
        return problem('the token is malformed');
      }
      if (issuer === undefined || !issuers.includes(issuer))
        return problem('the token is not from an allowed issuer');
      try {
        const { payload, protectedHeader } = await jwtVerify(
          token,
          (h, t) => resolve(h, t, issuer),
          { ...options, currentDate: new Date(c.now()) },
        );
        const claims = celValue(payload) as Mapping;
        const header = celValue(protectedHeader);
        // requiredClaims makes exp present and numeric.
        verified.set(token, { claims, header, exp: payload.exp! });
        c.setActionResult('jwt_validation', { claims, tokens: [{ claims, header }] });
        return undefined;
      } catch (err) {
        return problemOf(err);
      }
    };

    const action: CompiledAction = {
      alwaysTerminates: false,
      run(c) {
        return verify(c).then((found) => {
          if (found === undefined) return undefined;
          if (!enforce) {
            c.event('would-refuse-jwt', `${found.detail} (enforce is false: let through)`);
            return undefined;
          }
          c.event('jwt-refused', found.detail);
          return refusal(found.visitor);
        });
      },
    };
    return action;
  },
};
