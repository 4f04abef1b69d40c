/**
 * A JWT issuer for the tests of the jwt-validation action: an RS256 key pair, its JWKS as a JSON
 * document to serve, tokens it signs, and the action's config that trusts it, as ngrok's example
 * prints it.
 */
import { exportJWK, generateKeyPair, SignJWT, type KeyLike } from 'jose';

export const JWT_ISSUER = 'https://id.burrow.test/';
export const JWT_AUDIENCE = 'urn:example:api';

/** A token source of the action's `http.tokens`. */
export interface JwtTokenSource {
  type: string;
  method: 'header' | 'body';
  name: string;
  prefix?: string;
}

export interface TestJwtIssuer {
  /** The JWKS (`{"keys": [...]}`) to serve at the URL the action is given. */
  jwks: string;
  /** A token for `alice`, valid 5 minutes, with `typ` in its header when given. */
  sign(typ?: string): Promise<string>;
}

/**
 * A new issuer with key id `k1`.
 * @example const issuer = await testJwtIssuer(); res.end(issuer.jwks);
 */
export async function testJwtIssuer(): Promise<TestJwtIssuer> {
  const keys: { privateKey: KeyLike; publicKey: KeyLike } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  return {
    jwks: JSON.stringify({ keys: [jwk] }),
    sign: (typ) =>
      new SignJWT({ sub: 'alice' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1', ...(typ && { typ }) })
        .setIssuer(JWT_ISSUER)
        .setAudience(JWT_AUDIENCE)
        .setExpirationTime('5m')
        .sign(keys.privateKey),
  };
}

/**
 * A jwt-validation action trusting the issuer's keys at `jwksUrl`, reading `tokens`.
 * @example jwtValidation(`${jwks}/jwks.json`, [{ type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' }])
 */
export function jwtValidation(jwksUrl: string, tokens: readonly JwtTokenSource[]) {
  return {
    type: 'jwt-validation',
    config: {
      issuer: { allow_list: [{ value: JWT_ISSUER }] },
      audience: { allow_list: [{ value: JWT_AUDIENCE }] },
      http: { tokens },
      jws: {
        allowed_algorithms: ['RS256'],
        keys: { sources: { additional_jkus: [jwksUrl] } },
      },
    },
  };
}
