import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Sealed cookies for the login actions (openid-connect, oauth): JSON encrypted and authenticated
 * with AES-256-GCM under a key derived by HKDF-SHA256 from the action's client secret. The
 * cookie's name is the additional authenticated data, so a value sealed for one cookie (the
 * pending login) is refused as another (the session). Any edge node with the same policy derives
 * the same key, so a login started on one node finishes on another and survives restarts.
 */

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * A 32-byte key for `secret`, bound to `context` (action type, issuer or provider, client id and
 * auth id) so two actions sharing a client secret still cannot read each other's cookies.
 * @example const key = cookieKey('s3cret', 'openid-connect\nhttps://id.example\nclient\noidc');
 */
export function cookieKey(secret: string, context: string): Buffer {
  return Buffer.from(
    hkdfSync('sha256', secret, 'burrow traffic-policy login cookie v1', context, 32),
  );
}

/** `value` as JSON, encrypted and signed for cookie `name`: base64url(iv | ciphertext | tag). */
export function seal(key: Buffer, name: string, value: unknown): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(name));
  const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

/** What seal() wrapped, or undefined when `text` was not sealed with `key` for `name` (or was changed). */
export function unseal(key: Buffer, name: string, text: string): unknown {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return undefined;
  const raw = Buffer.from(text, 'base64url');
  if (raw.length < IV_BYTES + TAG_BYTES + 2) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(name));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    const plain = Buffer.concat([
      decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)),
      decipher.final(),
    ]);
    return JSON.parse(plain.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/** One cookie of a Cookie header: its name and value, trimmed. */
export interface RequestCookie {
  name: string;
  /** Undefined for a pair without `=` (all name). */
  value: string | undefined;
  /** The pair as sent, trimmed, to pass it on unchanged. */
  text: string;
}

/** The cookies of Cookie headers `headers` (a client may send several), in order. */
export function parseCookies(headers: readonly string[]): RequestCookie[] {
  const out: RequestCookie[] = [];
  for (const header of headers) {
    for (const pair of header.split(';')) {
      const text = pair.trim();
      if (text === '') continue;
      const eq = pair.indexOf('=');
      out.push(
        eq > 0
          ? { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim(), text }
          : { name: text, value: undefined, text },
      );
    }
  }
  return out;
}

/** The values of cookie `name` in Cookie headers `headers`. */
export function cookieValues(headers: readonly string[], name: string): string[] {
  return cookiesNamed(parseCookies(headers), name);
}

/** The values of the cookies named `name` among `cookies`. */
export function cookiesNamed(cookies: readonly RequestCookie[], name: string): string[] {
  const out: string[] = [];
  for (const c of cookies) if (c.name === name && c.value !== undefined) out.push(c.value);
  return out;
}

/** `cookies` without those named in `names`, as one Cookie header; '' when nothing is left. */
export function withoutCookies(
  cookies: readonly RequestCookie[],
  names: readonly string[],
): string {
  return cookies
    .filter((c) => !names.includes(c.name))
    .map((c) => c.text)
    .join('; ');
}

/** Attributes of a Set-Cookie header. */
export interface CookieAttributes {
  path: string;
  /** Seconds; 0 deletes the cookie. */
  maxAge: number;
  secure: boolean;
  domain?: string | undefined;
}

/** A Set-Cookie value: HttpOnly and SameSite=Lax always, Secure on https. */
export function setCookie(name: string, value: string, a: CookieAttributes): string {
  let out = `${name}=${value}; Path=${a.path}; Max-Age=${Math.max(0, Math.floor(a.maxAge))}; HttpOnly; SameSite=Lax`;
  if (a.maxAge <= 0) out += '; Expires=Thu, 01 Jan 1970 00:00:00 GMT';
  if (a.secure) out += '; Secure';
  if (a.domain) out += `; Domain=${a.domain}`;
  return out;
}
