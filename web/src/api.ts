/**
 * The dashboard talks to the same REST API as every client: same paths, same error bodies. The
 * session cookie authenticates; every change also sends the session's CSRF token.
 */

/** An error reply of the API, with the message it gave. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | undefined,
    readonly details: Record<string, string>,
  ) {
    super(message);
  }
}

let csrfToken = '';

/** Remember the CSRF token of the current session (from /auth/session or sign-in). */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/** Called when the API says the session has ended, so the app can show sign-in. */
let onSignedOut: () => void = () => undefined;
export function setSignedOutHandler(handler: () => void): void {
  onSignedOut = handler;
}

type Json = Record<string, unknown>;

/**
 * Call the API; resolves with the JSON body (undefined for 204), rejects with an {@link ApiError}.
 * @example const { keys } = await api<{ keys: ApiKey[] }>('GET', '/api_keys');
 */
export async function api<T = Json>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { 'Service-Version': '2', Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'The Burrow server cannot be reached. Is it running?', undefined, {});
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { msg: text };
  }
  if (!res.ok) {
    const e = parsed as { msg?: string; error_code?: string; details?: Record<string, string> };
    if (res.status === 401 && !path.startsWith('/auth/')) onSignedOut();
    throw new ApiError(res.status, e.msg ?? `HTTP ${res.status}`, e.error_code, e.details ?? {});
  }
  return parsed as T;
}

/** The message to show for anything thrown by {@link api}. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.code ? `${err.message} (${err.code})` : err.message;
  return err instanceof Error ? err.message : String(err);
}

/** A reference to another resource, as the API gives it. */
export interface Ref {
  id: string;
  uri: string;
}
