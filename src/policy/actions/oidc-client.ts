import * as oidc from 'openid-client';
import { LoginError, type LoginProvider } from './login-flow.js';

/**
 * What openid-connect and oauth share of talking to the provider through openid-client: the
 * authorization URL of the code flow (PKCE S256, state, nonce), the code exchange, and the
 * LoginError a refusal becomes.
 */

type AuthorizationRequest = Parameters<LoginProvider['authorizationUrl']>[0];
type Callback = Parameters<LoginProvider['finish']>[0];

/**
 * The provider's login page for `a`, asking for `scopes`; `nonce` is sent only to providers that
 * answer with an ID token, and `prompt` (`login`, `select_account`) when a fresh login is forced.
 */
export function authorizationUrl(
  client: oidc.Configuration,
  scopes: readonly string[],
  a: AuthorizationRequest,
  options: { nonce: boolean; prompt: string },
): URL {
  return oidc.buildAuthorizationUrl(client, {
    redirect_uri: a.redirectUri,
    scope: scopes.join(' '),
    state: a.state,
    code_challenge: a.codeChallenge,
    code_challenge_method: 'S256',
    ...(options.nonce ? { nonce: a.nonce } : {}),
    ...(a.forceLogin ? { prompt: options.prompt } : {}),
  });
}

/**
 * Exchange the code of callback `a` (state and PKCE checked; with `idToken`, the ID token and its
 * nonce too). Throws what openid-client throws: pass it to {@link loginErrorOf}.
 */
export function exchangeCode(
  client: oidc.Configuration,
  a: Callback,
  idToken: 'required' | 'if-sent' | 'none',
): ReturnType<typeof oidc.authorizationCodeGrant> {
  return oidc.authorizationCodeGrant(
    client,
    a.callbackUrl,
    {
      pkceCodeVerifier: a.codeVerifier,
      expectedState: a.state,
      ...(idToken !== 'none' ? { expectedNonce: a.nonce } : {}),
      ...(idToken === 'required' ? { idTokenExpected: true } : {}),
    },
    { redirect_uri: a.redirectUri },
  );
}

/**
 * Why openid-client refused, as a LoginError: the provider refusing the code (invalid_grant, …)
 * is the browser's problem (400); an unreachable or misbehaving provider is a 502.
 */
export function loginErrorOf(err: unknown): LoginError {
  if (err instanceof LoginError) return err;
  if (err instanceof oidc.ResponseBodyError) {
    const detail = err.error_description ? ` (${err.error_description})` : '';
    return new LoginError(
      err.status >= 500 ? 502 : 400,
      `the identity provider refused the code: ${err.error}${detail}`,
      { cause: err },
    );
  }
  if (err instanceof oidc.AuthorizationResponseError) {
    return new LoginError(400, `the identity provider refused the login: ${err.error}`, {
      cause: err,
    });
  }
  const message = (err as Error)?.message ?? String(err);
  return new LoginError(502, `the identity provider's answer could not be used: ${message}`, {
    cause: err,
  });
}
